"""Fakes at the edges: a Backend that records launches and reports scripted states, and a runner that plays
squeue, sacct and scancel (the subprocess boundary of the real Slurm backend)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.backends import base
from studyctl.backends.base import Backend
from studyctl.backends.slurm.sacct import FIELDS
from studyctl.definition.checkpoint.points import Point
from studyctl.states import FailureClass, State

B = TypeVar("B", bound=Backend)
SWEEP = """\
study: {name}
models: [gpt2-125m]
matrix: {{zero_stage: [0, 1, 2, 3], nodes: 1, ranks_per_node: 1}}
filesystems:
  scratch: {{path: {fs}}}
checkpoint: {{scale: 0.001, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4}}
local: {{timeout_s: {timeout}}}
ceilings: {ceilings}
calibration: {{enabled: false}}
"""


def write_sweep(tmp_path: Path, name: str = "s", timeout: int = 77, ceilings: str = "off") -> Path:
    """A four-point sweep (ZeRO 0-3) on a scratch directory under `tmp_path`; `ceilings: on` adds its one ceiling
    point (one resource shape)."""
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(SWEEP.format(name=name, fs=fs, timeout=timeout, ceilings=ceilings))
    return path


class FakeBackend(Backend):
    """A submit-and-return backend: records every launch and cancel, reports the states a test scripts.

    `states[point_id]` is what poll says of that point's live attempt (nothing if unset: still queued,
    no news); `finish(launch)` writes the worker's result file, which wins over any backend state.
    """

    name = "fake"

    def __init__(self, time_limit: int | None = None) -> None:
        self.launched: list[Launch] = []
        self.adopted: list[Active] = []
        self.polled: list[list[Active]] = []
        self.cancelled: list[Active] = []
        self.states: dict[str, State] = {}
        self.recoverable: dict[str, Handle] = {}  # point_id → handle recover() finds for it
        self.stale: str | None = None
        self.time_limit = time_limit

    def time_limit_s(self, point: Point) -> int | None:
        return self.time_limit

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        self.adopted += adopted
        for launch in launches:
            self.launched.append(launch)
            record_handle(launch, Handle(job_id=f"{launch.point_id}-{launch.attempt}"))
            record_update(Update(launch.point_id, launch.attempt, State.PENDING))

    def poll(self, active: Sequence[Active]) -> list[Update]:
        self.polled.append(list(active))
        updates = []
        for a in active:
            state = self.states.get(a.launch.point_id)
            if state is None:
                continue
            failure = None if state in (State.PENDING, State.RUNNING, State.COMPLETED) else FailureClass.SCHEDULER
            updates.append(Update(a.launch.point_id, a.launch.attempt, state, failure,
                                  f"scripted {state.value}" if failure else None))
        return updates

    def cancel(self, active: Sequence[Active]) -> None:
        self.cancelled += active

    def recover(self, active: Sequence[Active]) -> list[tuple[Active, Handle]]:
        return [(a, self.recoverable[a.launch.point_id]) for a in active
                if not a.handle.job_id and a.launch.point_id in self.recoverable]

    def note(self) -> str | None:
        return self.stale

    @staticmethod
    def finish(launch: Launch) -> None:
        launch.paths.result.write_text(json.dumps({"point_id": launch.point_id, "provenance": {}}))


class FakeSupervisor(FakeBackend):
    """Like the local backend: runs to completion, attempts wait PLANNED in its queue, live orphans are adopted."""

    name = "fakelocal"
    runs_to_completion: ClassVar[bool] = True
    initial_state: ClassVar[State] = State.PLANNED
    adopts: ClassVar[bool] = True

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        self.adopted += adopted
        for launch in launches:
            self.launched.append(launch)
            record_handle(launch, Handle(pid=4242))
            record_update(Update(launch.point_id, launch.attempt, State.RUNNING))
            self.finish(launch)
            record_update(Update(launch.point_id, launch.attempt, State.COMPLETED))


@contextmanager
def registered(backend: B) -> Iterator[B]:
    """`backend` under its name in the registry (every command gets this one instance) for the block;
    a real backend's entry (e.g. slurm with a FakeSlurm runner) comes back afterwards."""
    before = base._REGISTRY.get(backend.name)
    base.register(backend.name, type(backend), lambda sweep, paths: backend)
    try:
        yield backend
    finally:
        base.unregister(backend.name)
        if before is not None:
            base._REGISTRY[backend.name] = before


def sacct_line(job_id: str, name: str, state: str, exit_code: str = "0:0", nodes: str = "n1",
               start: str = "1", end: str = "Unknown", reason: str = "None") -> str:
    """One line of `sacct -P -o <FIELDS>`."""
    values = {"JobID": job_id, "JobName": name, "State": state, "ExitCode": exit_code, "NodeList": nodes,
              "Start": start, "End": end, "Reason": reason}
    return "|".join(values[f] for f in FIELDS)


@dataclass
class FakeSlurm:
    """A `subprocess.run` stand-in for squeue, sacct and scancel: scripted output, every call recorded."""

    squeue: list[str] = field(default_factory=list)  # "%i|%j" lines
    sacct_names: list[str] = field(default_factory=list)  # JobID|JobName lines (find_jobs' query)
    sacct: list[str] = field(default_factory=list)  # sacct_line()s (the watcher's query)
    sacct_error: str | None = None  # sacct exits 1 with this on stderr
    calls: list[list[str]] = field(default_factory=list)

    def __call__(self, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
        self.calls.append(list(cmd))
        if cmd[0] == "squeue":
            return subprocess.CompletedProcess(cmd, 0, "\n".join(self.squeue) + "\n", "")
        if cmd[0] == "sacct" and self.sacct_error is not None:
            return subprocess.CompletedProcess(cmd, 1, "", self.sacct_error)
        if cmd[0] == "sacct":
            lines = self.sacct if "-D" in cmd else self.sacct_names
            return subprocess.CompletedProcess(cmd, 0, "\n".join(lines) + "\n", "")
        if cmd[0] == "scancel":
            return subprocess.CompletedProcess(cmd, 0, "", "")
        raise AssertionError(f"unexpected command {cmd}")

    def scancelled(self) -> list[str]:
        return [job for c in self.calls if c[0] == "scancel" for job in c[1:]]


def study_paths(results: Path, name: str = "s") -> StudyPaths:
    return StudyPaths((results / name).resolve())
