"""The one library the CLI calls: plan, submit, resubmit, status, cancel, collect, compare."""

from __future__ import annotations

from studyctl.analysis.reporting import collect_study, compare_studies, parse_threshold
from studyctl.study.runs import StatusReport, StudyDir, SubmitReport, cancel, find_study, resubmit, status, submit

__all__ = ["StatusReport", "StudyDir", "SubmitReport", "cancel", "collect_study", "compare_studies", "find_study",
           "parse_threshold", "resubmit", "status", "submit"]
