"""The one library the CLI calls: plan, submit, resubmit, status, cancel, collect, compare."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyctl.analysis.reporting import collect_study, compare_studies, parse_threshold
from studyctl.study.runs import StatusReport, StudyDir, SubmitReport, cancel, find_study, resubmit, status, submit

if TYPE_CHECKING:
    from studyctl.analysis.mlperf import ModelVerdict

__all__ = ["StatusReport", "StudyDir", "SubmitReport", "cancel", "collect_study", "compare_studies", "find_study",
           "mlperf_report", "parse_threshold", "plan_capacity", "resubmit", "status", "submit"]


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
