"""The backend protocol: nothing outside `backends/` knows which backend runs.

A study hands a backend `Launch`es; the backend reports a `Handle` for each as soon as it has
one (so the ledger records job ids before anything runs) and later `Update`s of state.
The worker's result file, not the backend, is the truth for success: the study layer checks
it first and asks the backend only about points without one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from studyctl.points import Point
from studyctl.states import FailureClass, State


@dataclass(frozen=True)
class Launch:
    """One attempt of one point, ready to run."""

    study: str
    point_id: str
    attempt: int
    point: Point
    task_file: Path  # WorkerTask JSON the worker reads
    attempt_dir: Path  # logs go here; result.json / error.json too
    time_limit_s: int | None  # the per-point limit (local) or job time limit (slurm)


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


class Backend(Protocol):
    name: str

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle,
               record_update: RecordUpdate) -> None:
        """Start the attempts. Call `record_handle` the moment each has a handle.

        Slurm returns once everything is submitted; local runs them to the end (with its own
        concurrency and timeouts) and reports every state change through `record_update`.
        """
        ...

    def poll(self, active: Sequence[Active]) -> list[Update]:
        """Current states of attempts that have no result file yet (one batched query)."""
        ...

    def cancel(self, active: Sequence[Active]) -> None:
        ...
