"""The one library the CLI calls: plan, submit, resubmit, status, cancel, models; collect, compare, mlperf.

Two halves in one door. Planning and following a study (plan, status, cancel, resubmit, models) never load
the analysis stack (pandas, matplotlib, jinja2), and submitit only when points go to Slurm: `sweep status`
answers in a fraction of a second. collect, compare and mlperf import the analysis stack when called (tested
in tests/unit/test_light_api.py).

Results carry what the caller needs to know about the backend that ran (e.g. `SubmitReport.runs_to_completion`:
show progress while it runs, or say how to follow the queued points); nothing here names a backend.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Update
from studyctl.backends.base import DEFAULT as DEFAULT_BACKEND
from studyctl.backends.base import check_name as check_backend
from studyctl.definition.checkpoint.modelinfo import model_rows
from studyctl.definition.checkpoint.reshard_counts import ReshardSummary
from studyctl.definition.planning.expand import iter_points
from studyctl.definition.planning.needs import BLOCKS_ON, RESTORE_AT, TrainingNeeds
from studyctl.definition.planning.plan import PlanSummary, check_budget, plan_rows, refuse_engines_without_torch
from studyctl.definition.planning.plan_row import PlanRow, SizedColumns
from studyctl.definition.planning.sweep import SweepFile
from studyctl.errors import UserError
from studyctl.states import EXCLUDED
from studyctl.study.cancel import cancel
from studyctl.study.resubmit import resubmit
from studyctl.study.status import StatusReport, read_points, status
from studyctl.study.store import find_study, load_given_sweep
from studyctl.study.submit import SubmitReport, submit

if TYPE_CHECKING:
    from studyctl.analysis.collect import CollectResult
    from studyctl.analysis.compare import CompareResult
    from studyctl.analysis.mlperf.view import ModelVerdict
    from studyctl.analysis.status import PointStatus
    from studyctl.definition.checkpoint.points import Point
    from studyctl.definition.planning.expand import PlannedPoint

__all__ = [
    "BLOCKS_ON",
    "DEFAULT_BACKEND",
    "RESTORE_AT",
    "Plan",
    "PlanRow",
    "PlanSummary",
    "ReshardSummary",
    "SizedColumns",
    "StatusReport",
    "StudyPaths",
    "SubmitReport",
    "TrainingNeeds",
    "Update",
    "cancel",
    "check_backend",
    "collect",
    "compare",
    "find_study",
    "mlperf_report",
    "model_rows",
    "parse_threshold",
    "plan",
    "plan_capacity",
    "resubmit",
    "status",
    "submit",
]


@dataclass
class Plan:
    """A sweep and its plan rows, streamed (a million points never sit in memory); `summary` totals the rows
    streamed so far, so once `rows()` is consumed it holds the whole study's, and the points were judged for
    `backend` in the same pass (`capacity`)."""

    sweep: SweepFile
    backend: str = DEFAULT_BACKEND
    summary: PlanSummary = field(default_factory=PlanSummary)
    _judge: Any = field(default=None, init=False, repr=False)  # backends.capacity.Judge, fed by rows()
    _left_out: list[str] = field(default_factory=list, init=False, repr=False)  # added points that do not fit
    _capacity: Any = field(default=None, init=False, repr=False)  # definition.planning.plan.Capacity, read once

    def capacity_here(self) -> Any:
        """What the plan's backend offers (free space, memory), read once per plan."""
        from studyctl.backends.base import backend_class

        if self._capacity is None:
            self._capacity = backend_class(self.backend).capacity(self.sweep)
        return self._capacity

    def rows(self) -> Iterator[PlanRow]:
        """The points as submit would run them: the ones studyctl adds fitted to the backend (`within_capacity`)."""
        from studyctl.backends.base import backend_class
        from studyctl.backends.capacity import Judge

        self.summary, self._judge, self._left_out = PlanSummary(), Judge(self.sweep, backend_class(self.backend)), []
        points = _as_run(self.sweep, self.backend, self._left_out, self.capacity_here())
        for row in plan_rows(_judged(points, self._judge), self.sweep):
            self.summary.add(row)
            yield row

    def capacity(self) -> tuple[list[str], list[str]]:
        """(problems, notes) on the plan's backend; the points are expanded again only if rows() was not read."""
        if self._judge is None:
            return plan_capacity(self.sweep, self.summary, self.backend)
        judgement = self._judge.verdict(self.summary)
        return judgement.refusals + judgement.warnings, self._left_out + judgement.notes

    def projection_lines(self, results: Path = Path("results")) -> list[str]:
        """Per resource shape: the full-size time an earlier run of this study predicts (its fit, band and scale),
        else what calibration will measure (the analysis stack loads only where an earlier collect left tables)."""
        from studyctl.analysis.projection.plan import projection_lines
        from studyctl.definition.planning.calibration import shape_calibrations

        table = StudyPaths((results / self.sweep.study).resolve()).tables / "checkpoints.parquet"
        free = self.capacity_here().free_bytes
        return projection_lines(shape_calibrations(self.sweep, iter_points(self.sweep), free), table)

    def check_budget(self, budget_node_hours: float | None) -> None:
        """The same refusal (exit 1) `submit` gives before it records or runs anything."""
        check_budget(self.summary, budget_node_hours)


def _as_run(sweep: SweepFile, backend: str, left_out: list[str], capacity: Any = None) -> Iterator[PlannedPoint]:
    """The points as submit would run them on `backend` (`study.store.planned_to_run`), streamed."""
    from studyctl.backends.base import backend_class
    from studyctl.definition.planning.fit_added import within_capacity

    cls = backend_class(backend)
    return within_capacity(sweep, iter_points(sweep), capacity or cls.capacity(sweep),
                           lambda p: cls.point_time_limit_s(sweep, p), left_out)


def _judged(points: Iterator[PlannedPoint], judge: Any) -> Iterator[PlannedPoint]:
    for pp in points:
        judge.add(pp)
        yield pp


def plan(sweep_path: Path, backend: str = DEFAULT_BACKEND) -> Plan:
    """The plan of a sweep for `backend` (an unknown one: UserError, exit 2, before anything is read)."""
    check_backend(backend)
    return Plan(refuse_engines_without_torch(load_given_sweep(sweep_path)), backend)


def plan_capacity(sweep: Any, summary: Any, backend: str) -> tuple[list[str], list[str]]:
    """Will the points find their filesystems, fit the disk and the hosts' memory, and end within their time limit
    on `backend`? (problems, notes): what `submit` refuses or the backend refuses per point, judged the same way.
    An unknown backend is a UserError (exit 2), as in `submit`."""
    from studyctl.backends.base import backend_class
    from studyctl.backends.capacity import judge

    left_out: list[str] = []
    judgement = judge(sweep, backend_class(backend), _as_run(sweep, backend, left_out), summary)
    return judgement.refusals + judgement.warnings, left_out + judgement.notes


def told_settings(points: Sequence[Point], shown: Sequence[str]) -> list[str]:
    """Per point, the settings that tell it from the others beyond the `shown` ones ("engine dcp, strategy
    async"; "" where nothing else varies): a table that names a shape alone would show such points alike."""
    from studyctl.analysis.labels import told_texts

    return told_texts(points, shown)


def _point_statuses(study: StudyPaths) -> list[PointStatus]:
    """Every point's state as the ledger last recorded it: read-only (no reconcile, no sacct, no deletes)."""
    from studyctl.analysis.labels import point_labels
    from studyctl.analysis.status import PointStatus

    out = []
    points = read_points(study)
    for p, label in zip(points, point_labels([p.point for p in points]), strict=True):
        if p.excluded:
            out.append(PointStatus(p.point_id, EXCLUDED, p.attempts, excluded_reason=p.exclude_reason, label=label,
                                   role=p.point.role))
        else:
            out.append(PointStatus(p.point_id, p.state.value, p.attempts,
                                   failure_reason=p.latest.reason if p.latest else None, label=label,
                                   role=p.point.role))
    return out


def collect(study_ref: str | Path, results: Path = Path("results"), import_dlio: Sequence[Path] = (),
            ratios: Sequence[str] = (), force: bool = False, dlio_reads: str = "warm") -> CollectResult:
    """Tables, plots, ratios and report of a study, with the ledger's point states as last recorded.

    States are not refreshed here (`studyctl sweep status` does that): collect never polls a scheduler.
    """
    from studyctl.analysis.collect import collect as collect_files

    study = find_study(study_ref, results)
    return collect_files(study.root, _point_statuses(study), list(import_dlio), ratios=list(ratios), force=force,
                         dlio_reads=dlio_reads)


def parse_threshold(text: str) -> float:
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UserError(f"--threshold: {text!r} is not a fraction or a percentage (e.g. 5% or 0.05)") from None
    if not 0 <= value < 1:
        raise UserError(f"--threshold: {text!r} must be between 0% and 100%")
    return value


def compare(study_a: str | Path, study_b: str | Path, results: Path = Path("results"),
            threshold: str = "5%") -> CompareResult:
    """B against A on the settings they share; UserError (exit 2) when nothing is comparable."""
    from studyctl.analysis.compare import compare as compare_dirs

    limit = parse_threshold(threshold)
    a, b = find_study(study_a, results), find_study(study_b, results)
    return compare_dirs(a.root, b.root, limit)


def mlperf_report(study_ref: str | Path, results: Path = Path("results"), rules: str = "v3.0",
                  out: Path | None = None) -> tuple[list[ModelVerdict], Path, Path]:
    """The MLPerf Storage view of a study under `rules` (v2.0 or v3.0; anything else: UserError, exit 2):
    (per-model verdicts, html path, markdown path); with `out`, the v3.0-shaped results tree there too."""
    from studyctl.analysis.mlperf.rules import rule_set
    from studyctl.analysis.report.mlperf import mlperf_for_study

    rule_set(rules)  # a bad --rules is refused before the study is looked up
    study = find_study(study_ref, results)
    return mlperf_for_study(study.root, study.name, rules, out)
