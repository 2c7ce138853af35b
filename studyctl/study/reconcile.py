"""Bringing attempts the ledger calls active up to date: result files first, then each attempt's backend;
then removing what ended attempts left that an earlier command could not (`study.cleanup`).

Used by every command that changes a study (before it decides what to run) and by `status` (it is how
a batch scheduler's states are learned). Never by `collect`, which only reads the ledger.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Active, Update
from studyctl.backends import base
from studyctl.backends.base import Backend
from studyctl.definition.planning.sweep import SweepFile
from studyctl.states import State
from studyctl.study.cleanup import finish_cleanups
from studyctl.study.launches import existing_launch
from studyctl.study.ledger import AttemptRow, Ledger
from studyctl.study.recorder import Recorder


@dataclass
class Reconciled:
    """What reconciling found beyond the ledger writes it made."""

    # backend name → attempts an earlier studyctl started that still run under a backend that adopts them
    # (`since`: their start, from which their time limit counts)
    alive: dict[str, list[Active]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # why some states may be stale, per backend


def reconcile(paths: StudyPaths, ledger: Ledger, sweep: SweepFile | None,
              backends: Mapping[str, Backend] | None = None) -> Reconciled:
    """Update every active attempt from its files and its backend (made from `sweep` unless given).

    Without a sweep (its file unreadable) only the result files are read: no backend can be made.
    """
    found = Reconciled()
    made = dict(backends or {})
    _revive_lost(paths, ledger, sweep)
    by_backend: dict[str, list[AttemptRow]] = {}
    for row in ledger.active_attempts():
        by_backend.setdefault(row.backend, []).append(row)
    for name, rows in by_backend.items():
        backend = _backend(made, name, sweep, paths)
        recorder = Recorder(paths, ledger, sweep, backend=backend)
        alive = _reconcile_rows(paths, recorder, backend, rows)
        found.notes += recorder.notes
        if backend is not None:
            note = backend.note()
            if note:
                found.notes.append(f"{name}: {note}")
            if backend.adopts and alive:
                found.alive[name] = alive
    found.notes += finish_cleanups(paths, ledger, sweep, lambda name: _backend(made, name, sweep, paths))
    return found


def _backend(made: dict[str, Backend], name: str, sweep: SweepFile | None, paths: StudyPaths) -> Backend | None:
    """The backend `name`, made once from the sweep (None without one, or if it is no longer registered)."""
    if name not in made and sweep is not None and name in base.names():
        made[name] = base.make(name, sweep, paths)
    return made.get(name)


def _revive_lost(paths: StudyPaths, ledger: Ledger, sweep: SweepFile | None) -> None:
    """A LOST attempt whose result file is on disk after all (its ledger update failed on a full disk, or the
    scheduler forgot a job that did finish) is COMPLETED: a measurement on disk is never shown as lost."""
    revived = []
    for row in ledger.attempts_in(State.LOST):
        outcome = read_outcome(paths.attempt(row.point_id, row.attempt), row.point_id, row.attempt)
        if outcome is not None and outcome.state is State.COMPLETED:
            revived.append(outcome)
    Recorder(paths, ledger, sweep).updates(revived)


def _reconcile_rows(paths: StudyPaths, recorder: Recorder, backend: Backend | None,
                    rows: Sequence[AttemptRow]) -> list[Active]:
    """One backend's active attempts; returns those still alive (with their start as `since`)."""
    now = time.time()
    file_updates: list[Update] = []
    actives: list[Active] = []
    started: dict[tuple[str, int], float] = {}
    for row in rows:
        launch = existing_launch(paths, row, backend)
        if launch is None:
            outcome = read_outcome(paths.attempt(row.point_id, row.attempt), row.point_id, row.attempt)
            file_updates.append(outcome or Update(row.point_id, row.attempt, State.LOST, None,
                                                  "attempt directory or task.json missing", ended_at=now))
            continue
        outcome = read_outcome(launch.paths, row.point_id, row.attempt)
        if outcome is not None and outcome.state is State.COMPLETED:
            file_updates.append(outcome)
            continue
        actives.append(Active(launch, row.handle, row.submitted_at))
        started[(row.point_id, row.attempt)] = row.started_at or row.submitted_at
    recorder.updates(file_updates)
    if backend is None or not actives:
        return []
    recovered = backend.recover(actives)  # a runner died between submitting and recording the handles
    if recovered:
        recorder.handles([(a.launch, h) for a, h in recovered])
        fixed = {id(a): Active(a.launch, h, a.since) for a, h in recovered}
        actives = [fixed.get(id(a), a) for a in actives]
    updates = backend.poll(actives)
    recorder.updates(updates)
    ended = {(u.point_id, u.attempt) for u in updates if u.state not in (State.PENDING, State.RUNNING)}
    return [Active(a.launch, a.handle, started[(a.launch.point_id, a.launch.attempt)]) for a in actives
            if (a.launch.point_id, a.launch.attempt) not in ended]
