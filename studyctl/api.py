"""The one library the CLI calls: plan, submit, resubmit, status, cancel, collect, compare.

Results carry what the caller needs to know about the backend that ran (e.g. `SubmitReport.runs_to_completion`:
show progress while it runs, or say how to follow the queued points); nothing here names a backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyctl.analysis import reporting
from studyctl.analysis.reporting import CollectOutcome, parse_threshold
from studyctl.attempt.paths import StudyPaths
from studyctl.backends.base import names as backend_names
from studyctl.spec.expand import iter_points
from studyctl.spec.plan import plan_rows
from studyctl.spec.sweep import SweepFile, load_sweep
from studyctl.study.cancel import cancel
from studyctl.study.resubmit import resubmit
from studyctl.study.status import StatusReport, read_points, status
from studyctl.study.store import find_study
from studyctl.study.submit import SubmitReport, submit

if TYPE_CHECKING:
    from studyctl.analysis.mlperf import ModelVerdict

__all__ = ["CollectOutcome", "Plan", "StatusReport", "StudyPaths", "SubmitReport", "backend_names", "cancel",
           "collect_study", "compare_studies", "find_study", "mlperf_report", "parse_threshold", "plan",
           "plan_capacity", "resubmit", "status", "submit"]


@dataclass(frozen=True)
class Plan:
    """A sweep and its plan rows (one dict per point, streamed: a million points never sit in memory)."""

    sweep: SweepFile

    def rows(self) -> Iterator[dict[str, Any]]:
        return plan_rows(iter_points(self.sweep), self.sweep)


def plan(sweep_path: Path) -> Plan:
    return Plan(load_sweep(sweep_path))


def collect_study(study_ref: str | Path, results: Path = Path("results"), import_dlio: Path | None = None,
                  force: bool = False) -> CollectOutcome:
    """Tables, plots and report from a study's result files; the ledger is only read, never reconciled."""
    paths = find_study(study_ref, results)
    statuses = reporting.point_statuses(read_points(paths))
    return reporting.collect_study(paths, statuses, import_dlio, force)


def compare_studies(a: str | Path, b: str | Path, results: Path = Path("results"), threshold: str = "5%") -> Any:
    return reporting.compare_studies(find_study(a, results), find_study(b, results), threshold)


def mlperf_report(study_ref: str | Path, results: Path = Path("results")) -> tuple[list[ModelVerdict], Path, Path]:
    """The MLPerf Storage view of a study: (per-model verdicts, html path, markdown path)."""
    from studyctl.analysis.mlperf_report import mlperf_for_study

    study = find_study(study_ref, results)
    return mlperf_for_study(study.root, study.name)


def plan_capacity(sweep: Any, summary: Any, backend: str) -> tuple[list[str], list[str]]:
    """Will the largest point fit the filesystems' free space and the hosts' memory? (problems, notes)"""
    from studyctl.backends.capacity import probe
    from studyctl.spec.plan import capacity_notes, capacity_problems

    capacity = probe(sweep, backend)
    return capacity_problems(summary, capacity), capacity_notes(summary, capacity)
