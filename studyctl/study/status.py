"""`status`: points by state, reconciled first (how a batch scheduler's states are learned)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.backends import base
from studyctl.errors import UserError
from studyctl.spec.expand import expand
from studyctl.spec.sweep import SweepFile
from studyctl.states import ACTIVE_STATES, shown_state
from studyctl.study.ledger import Ledger, PointRow
from studyctl.study.lock import runner_active
from studyctl.study.reconcile import reconcile
from studyctl.study.repair import open_ledger, read_only_ledger
from studyctl.study.store import find_study, load_current_sweep, sync_points


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
    """Points by state. Reconciles first unless a runner holds the study (it keeps the ledger current)."""
    paths = find_study(study_ref, results)
    if runner_active(paths):  # it keeps the ledger current (and repaired) itself
        with Ledger(paths.ledger) as ledger:
            points = ledger.points()
        return StatusReport(paths, points, Counter(shown_state(p.state, p.excluded) for p in points))
    repaired: list[str] = []
    with open_ledger(paths, base.DEFAULT, repaired) as ledger:
        try:
            sweep: SweepFile | None = load_current_sweep(paths, ledger)
        except UserError:
            sweep = None
        if repaired and sweep is not None:
            sync_points(ledger, expand(sweep))
        notes = reconcile(paths, ledger, sweep).notes
        points = ledger.points()
    counts = Counter(shown_state(p.state, p.excluded) for p in points)
    return StatusReport(paths, points, counts, "; ".join(notes) or None, repaired)


def read_points(paths: StudyPaths) -> list[PointRow]:
    """The ledger's points as they stand, read-only: no reconciling, no writes (for collect)."""
    with read_only_ledger(paths) as ledger:
        return ledger.points()
