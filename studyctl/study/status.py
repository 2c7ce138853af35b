"""`status`: points by state, reconciled first (how a batch scheduler's states are learned)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.paths import StudyPaths
from studyctl.backends import base
from studyctl.definition.planning.sweep import SweepFile
from studyctl.errors import StorageError, UserError
from studyctl.states import ACTIVE_STATES, State, shown_state
from studyctl.study.ledger import PointRow
from studyctl.study.lock import runner_active
from studyctl.study.reconcile import reconcile
from studyctl.study.repair import open_ledger, read_only_ledger
from studyctl.study.store import find_study, load_current_sweep, planned_to_run, sync_points


@dataclass
class StatusReport:
    study: StudyPaths
    points: list[PointRow]
    counts: Counter[str]
    backend_note: str | None = None  # why states may be stale
    notes: list[str] = field(default_factory=list)  # what the command repaired (a lost or damaged ledger)

    @property
    def done(self) -> bool:
        return not any(p.state in ACTIVE_STATES for p in self.points if not p.excluded)


def status(study_ref: str | Path, results: Path = Path("results")) -> StatusReport:
    """Points by state. Reconciles first unless a runner holds the study (it keeps the ledger current).

    Where the ledger cannot be written (a read-only directory or file, a full disk), the ledger is read as it
    stands and the result files on disk are shown over it, with a note saying so: never a traceback, and a
    point whose result is on disk is never shown as anything but COMPLETED."""
    paths = find_study(study_ref, results)
    if runner_active(paths):  # it keeps the ledger current (and repaired) itself
        with read_only_ledger(paths) as ledger:
            points = ledger.points()
        return StatusReport(paths, points, Counter(shown_state(p.state, p.excluded) for p in points))
    if not _writable(paths):
        return _as_recorded(paths, f"{paths.root} is read-only: states as last recorded, updated from the result "
                                   "files on disk")
    try:
        return _reconciled(paths)
    except StorageError as exc:
        return _as_recorded(paths, f"{exc} (shown: states as last recorded, updated from the result files)")


def _writable(paths: StudyPaths) -> bool:
    return os.access(paths.root, os.W_OK) and (not paths.ledger.exists() or os.access(paths.ledger, os.W_OK))


def _as_recorded(paths: StudyPaths, note: str) -> StatusReport:
    """The ledger read-only, each unfinished or LOST attempt shown as its files say it ended (if they do)."""
    with read_only_ledger(paths) as ledger:
        points = [_from_files(paths, p) for p in ledger.points()]
    counts = Counter(shown_state(p.state, p.excluded) for p in points)
    return StatusReport(paths, points, counts, notes=[note])


def _from_files(paths: StudyPaths, point: PointRow) -> PointRow:
    a = point.latest
    if a is None or not (a.state in ACTIVE_STATES or a.state is State.LOST):
        return point
    u = read_outcome(paths.attempt(a.point_id, a.attempt), a.point_id, a.attempt)
    if u is None:
        return point
    result = str(paths.attempt(a.point_id, a.attempt).result) if u.state is State.COMPLETED else None
    failure = u.failure_class.value if u.failure_class else None
    return replace(point, latest=replace(a, state=u.state, failure_class=failure, reason=u.reason,
                                         result_path=result, node_list=u.node_list or a.node_list))


def _reconciled(paths: StudyPaths) -> StatusReport:
    repaired: list[str] = []
    with open_ledger(paths, base.DEFAULT, repaired) as ledger:
        try:
            sweep: SweepFile | None = load_current_sweep(paths, ledger)
        except UserError:
            sweep = None
        if repaired and sweep is not None:
            sync_points(ledger, planned_to_run(sweep, ledger.meta("backend") or base.DEFAULT, []))
        notes = reconcile(paths, ledger, sweep).notes
        points = ledger.points()
    counts = Counter(shown_state(p.state, p.excluded) for p in points)
    return StatusReport(paths, points, counts, "; ".join(notes) or None, repaired)


def read_points(paths: StudyPaths) -> list[PointRow]:
    """The ledger's points as they stand, read-only: no reconciling, no writes (for collect)."""
    with read_only_ledger(paths) as ledger:
        return ledger.points()
