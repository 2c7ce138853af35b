"""`status`: points by state, reconciled first (how a batch scheduler's states are learned)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.errors import UserError
from studyctl.states import ACTIVE_STATES, shown_state
from studyctl.study.ledger import Ledger, PointRow
from studyctl.study.lock import runner_active
from studyctl.study.reconcile import reconcile
from studyctl.study.store import find_study, load_current_sweep


@dataclass
class StatusReport:
    study: StudyPaths
    points: list[PointRow]
    counts: Counter[str]
    backend_note: str | None = None  # why states may be stale

    @property
    def done(self) -> bool:
        return not any(p.state in ACTIVE_STATES for p in self.points if not p.excluded)


def status(study_ref: str | Path, results: Path = Path("results")) -> StatusReport:
    """Points by state. Reconciles first unless a runner holds the study (it keeps the ledger current)."""
    paths = find_study(study_ref, results)
    notes: list[str] = []
    with Ledger(paths.ledger) as ledger:
        if not runner_active(paths):
            try:
                sweep = load_current_sweep(paths, ledger)
            except UserError:
                sweep = None
            notes = reconcile(paths, ledger, sweep).notes
        points = ledger.points()
    counts = Counter(shown_state(p.state, p.excluded) for p in points)
    return StatusReport(paths, points, counts, "; ".join(notes) or None)


def read_points(paths: StudyPaths) -> list[PointRow]:
    """The ledger's points as they stand, read-only: no reconciling, no writes (for collect)."""
    with Ledger(paths.ledger, readonly=True) as ledger:
        return ledger.points()
