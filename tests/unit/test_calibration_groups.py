"""Calibration per resource shape and fit group: every group of measure runs the analysis fits apart gets its own
ladder of larger-scale runs, so every cell gets a fitted projection, not only the sync ones."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from studyctl.analysis.projection import table as projection_table
from studyctl.analysis.tables import build_tables
from studyctl.definition.planning.calibration import CalibrationSources, shape_calibrations
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.fit_group import FIT_KEYS, FitGroup, row_fit_group
from studyctl.definition.planning.planned import PlannedPoint
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.planning.sweep import load_sweep, parse_sweep
from tests.resultgen import write_result

ROOT = Path(__file__).resolve().parents[2]


def strategies(**matrix: Any) -> Any:
    return parse_sweep({
        "study": "groups", "models": ["gpt2-125m"], "repetitions": 1,
        "matrix": {"zero_stage": 1, "ranks_per_node": 1, "io_mode": "direct", "strategy": ["sync", "async", "tiered"],
                   **matrix},
        "filesystems": {"scratch": {"path": "/tmp/groups", "kind": "local"},
                        "shm": {"path": "/dev/shm/groups", "kind": "memory"}},
        "checkpoint": {"scale": 0.001, "tier": "shm", "writes": 1, "reads": 1},
        "training": {"simulated_step": {"compute_s": 0.05}},
        "calibration": {"budget_share": 10, "max_disk_gib": 1000}}, Path("groups.yaml"))


def by_role(planned: list[PlannedPoint], role: str) -> list[PlannedPoint]:
    return [pp for pp in planned if pp.point.role == role and not pp.excluded]


def test_every_strategy_of_one_shape_gets_its_own_calibration_from_its_own_largest_checkpoint() -> None:
    s = strategies()
    planned = expand(s)
    measure, made = by_role(planned, "measure"), by_role(planned, "calibration")
    assert len({shape_of(pp.point) for pp in measure}) == 1
    assert {pp.point.checkpoint.strategy for pp in made} == {"sync", "async", "tiered"}
    per_strategy = defaultdict(set)
    for pp in made:
        per_strategy[pp.point.checkpoint.strategy].add(pp.point.checkpoint.scale)
    assert len({frozenset(v) for v in per_strategy.values()}) == 1  # the same ladder for each
    for pp in made:  # a copy of a measure point of its own strategy: every setting as measured but the scale
        p = pp.point
        assert any(p.model_copy(update={"checkpoint": p.checkpoint.model_copy(update={"scale": m.checkpoint.scale}),
                                        "role": "measure", "repetition": m.repetition}) == m
                   for m in (pp.point for pp in measure) if m.checkpoint.strategy == p.checkpoint.strategy)
    lines = shape_calibrations(s, planned)
    assert [c.group.strategy for c in lines if c.group] == ["sync", "async", "tiered"]
    assert all(c.scales and not c.why_none for c in lines)


def test_the_sync_calibration_keeps_its_point_ids() -> None:
    """The group that had the shape's calibration before keeps its points: a study that ran them reruns nothing."""
    sync_only = strategies(strategy="sync")
    before = {pp.point.point_id for pp in by_role(expand(sync_only), "calibration")}
    after = {pp.point.point_id for pp in by_role(expand(strategies()), "calibration")}
    assert before and before < after


def test_every_fit_key_of_the_analysis_splits_calibration_alike(tmp_path: Path) -> None:
    """Results of every measure and calibration point, read by the analysis: each fit it makes apart (shape, phase,
    FIT_KEYS) holds calibration runs, for settings varied along each of the fit keys a sweep can vary."""
    assert projection_table.FIT_KEYS is FIT_KEYS == FitGroup._fields  # the analysis keys its fits by these
    s = strategies(fsync=[True, False], cold_read=["auto", "none"])
    planned = expand(s)
    study = tmp_path / "groups"
    study.mkdir()
    (study / "sweep.yaml").write_text("study: groups\n")
    for pp in [*by_role(planned, "measure"), *by_role(planned, "calibration")]:
        write_result(study, pp.point, [1.0] * pp.point.checkpoint.writes, [1.0] * pp.point.checkpoint.reads)
    rows = build_tables(study).checkpoints
    roles: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    sources = CalibrationSources(s)
    for rec in rows.to_dict("records"):
        roles[projection_table.fit_key(rec)].add(rec["role"])
        point = next(pp.point for pp in planned if pp.point.point_id == rec["point_id"])
        assert row_fit_group(rec) == sources.group_of(point)[1]  # the rows carry what calibration grouped by
    varied = {k for k in FIT_KEYS if rows[k].astype(str).nunique() > 1}
    assert varied == {"strategy", "fsync", "cold_read_method"}
    assert roles and all(r == {"measure", "calibration"} for r in roles.values()), roles


def test_the_quickstart_strategies_sweep_calibrates_every_strategy() -> None:
    s = load_sweep(ROOT / "sweeps" / "quickstart-strategies.yaml")
    planned = expand(s)
    measured = {pp.point.checkpoint.strategy for pp in by_role(planned, "measure")}
    assert len(measured) > 1 and {pp.point.checkpoint.strategy for pp in by_role(planned, "calibration")} == measured
