"""`collect` and `compare` for a study directory: ledger states + result files → tables, plots, report."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studyctl.analysis.collect import PointStatus, Problem, collect
from studyctl.attempt.paths import StudyPaths
from studyctl.errors import UserError
from studyctl.states import EXCLUDED, NOT_FAILED


@dataclass
class CollectOutcome:
    study: StudyPaths
    unchanged: bool
    completed: int = 0
    failed: int = 0
    problems: list[Problem] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)
    report_html: Path | None = None
    report_md: Path | None = None
    files_read: int = 0
    files_cached: int = 0

    def summary_lines(self) -> list[str]:
        root = self.study.root
        lines = [f"study {self.study.name}: {self.completed} completed, {self.failed} failed"
                 + (" (nothing new since the last collect)" if self.unchanged else
                    f"; read {self.files_read} result files, {self.files_cached} from cache")]
        for p in self.problems:
            lines.append(f"  invalid result: point {p.point_id} attempt {p.attempt}: {p.reason}")
        if self.failed:
            lines.append(f"  rerun the failed points: studyctl sweep resubmit {self.study.name}")
        lines.append(f"tables: {root / 'tables'}")
        lines += [f"plot: {p}" for p in self.plots]
        lines.append(f"report: {self.report_html}")
        lines.append(f"report (Markdown): {self.report_md}")
        return lines


def point_statuses(points: Iterable[Any]) -> list[PointStatus]:
    """The ledger's view of every point (its point rows, handed in), for the report's coverage section."""
    statuses = []
    for p in points:
        cfg = p.config
        label = (f"{cfg['model']['name']} ZeRO-{cfg['zero_stage']} TP{cfg['tensor_parallel']}×PP"
                 f"{cfg['pipeline_parallel']} {cfg['nodes']}×{cfg['ranks_per_node']} {cfg['filesystem']} "
                 f"{cfg['io_mode']} rep {cfg['repetition']}")
        if p.excluded:
            statuses.append(PointStatus(p.point_id, EXCLUDED, p.attempts, excluded_reason=p.exclude_reason,
                                        label=label))
        else:
            statuses.append(PointStatus(p.point_id, p.state.value, p.attempts,
                                        failure_reason=p.latest.reason if p.latest else None, label=label))
    return statuses


def collect_study(study: StudyPaths, statuses: list[PointStatus], import_dlio: Path | None = None,
                  force: bool = False) -> CollectOutcome:
    failed = sum(1 for s in statuses if s.state not in NOT_FAILED)
    completed = sum(1 for s in statuses if s.state == "COMPLETED")
    res = collect(study.root, statuses, import_dlio, force=force)
    return CollectOutcome(study, res.unchanged, completed, failed, res.problems, res.tables, res.plots,
                          res.report_html, res.report_md, res.files_read, res.files_cached)


def parse_threshold(text: str) -> float:
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UserError(f"--threshold: {text!r} is not a fraction or a percentage (e.g. 5% or 0.05)") \
            from None
    if not 0 <= value < 1:
        raise UserError(f"--threshold: {text!r} must be between 0% and 100%")
    return value


def compare_studies(a: StudyPaths, b: StudyPaths, threshold: str = "5%") -> Any:
    from studyctl.analysis.compare import compare

    return compare(a.root, b.root, parse_threshold(threshold))
