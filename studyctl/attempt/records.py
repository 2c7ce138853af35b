"""What one attempt is, as study and backends exchange it: launch, handle, state update."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from studyctl.attempt.paths import AttemptPaths
from studyctl.definition.checkpoint.points import Point
from studyctl.states import FailureClass, State


@dataclass(frozen=True)
class Launch:
    """One attempt of one point, ready to run."""

    study: str
    point_id: str
    attempt: int
    point: Point
    paths: AttemptPaths  # task.json the worker reads; logs, result.json / error.json
    time_limit_s: int | None  # the backend's per-point limit; None: the backend derives its own (or none)


@dataclass(frozen=True)
class Handle:
    """Where a launched attempt lives, as the ledger stores it."""

    job_id: str | None = None  # Slurm job id ("123" or "123_4"), None locally
    array_index: int | None = None
    pid: int | None = None  # local: the process-group leader


@dataclass(frozen=True)
class Update:
    """A state change a backend observed for one attempt."""

    point_id: str
    attempt: int
    state: State
    failure_class: FailureClass | None = None
    reason: str | None = None
    exit_code: int | None = None
    node_list: str | None = None
    started_at: float | None = None  # epoch seconds
    ended_at: float | None = None


@dataclass(frozen=True)
class Active:
    """An attempt the ledger believes is queued or running."""

    launch: Launch
    handle: Handle
    since: float | None = None  # epoch seconds of submission (or start): how long it has been unaccounted for


RecordHandle = Callable[[Launch, Handle], None]
RecordUpdate = Callable[[Update], None]
