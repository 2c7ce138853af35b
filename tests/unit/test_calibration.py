"""Calibration points: larger-scale runs per resource shape that projections are fitted from, bounded, switchable."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from studyctl.definition.planning.auxiliary import auxiliary_points
from studyctl.definition.planning.calibration import (
    CalibrationSources,
    estimated_run_seconds,
    ladder,
    shape_calibrations,
)
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.planning.sweep import load_sweep, parse_sweep
from studyctl.errors import UserError
from studyctl.units import GIB

BASE: dict[str, Any] = {
    "study": "x", "models": ["gpt2-1.5b", "llama_7b"],
    "matrix": {"zero_stage": [1, 3], "io_mode": ["buffered", "direct"], "ranks_per_node": 2},
    "filesystems": {"a": {"path": "/tmp/a"}}, "repetitions": 2, "checkpoint": {"scale": 0.001},
}


def sweep(**changes: Any) -> Any:
    data = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return parse_sweep(data, Path("mem.yaml"))


def test_a_small_scale_study_gets_larger_scale_points_per_shape_after_its_measure_points() -> None:
    s = sweep(calibration={"max_disk_gib": 1000, "budget_share": 10})
    planned = expand(s)
    measure = [pp for pp in planned if pp.point.role == "measure"]
    extra = [pp for pp in planned if pp.point.role == "calibration"]
    assert planned[: len(measure)] == measure  # measure points first, in their own order
    assert [pp.order for pp in planned] == list(range(len(planned)))
    assert len({pp.point.point_id for pp in planned}) == len(planned)
    shapes = {shape_of(pp.point) for pp in measure}
    assert {shape_of(pp.point) for pp in extra} == shapes
    per_shape = Counter(shape_of(pp.point) for pp in extra)
    assert set(per_shape.values()) == {s.calibration.scales * min(s.repetitions, s.calibration.repetitions)}
    for pp in extra:
        assert 0.001 < pp.point.checkpoint.scale <= s.calibration.max_scale
        assert not pp.excluded
        # the shape's largest checkpoint, every other setting as measured
        assert pp.point.model.name == "llama_7b" and pp.point.zero_stage == 1
    assert sorted({pp.point.checkpoint.scale for pp in extra}) == [0.01, 0.1]


def test_off_switch_and_shapes_already_measured_at_a_large_scale() -> None:
    assert not [pp for pp in expand(sweep(calibration={"enabled": False})) if pp.point.role == "calibration"]
    assert not [pp for pp in expand(sweep(checkpoint={"scale": 0.2})) if pp.point.role == "calibration"]
    # scale an axis: a shape with a point at or above the threshold uses its own points
    mixed = sweep(matrix={"scale": [0.001, 0.1]})
    assert not [pp for pp in expand(mixed) if pp.point.role == "calibration"]


def test_excluded_points_are_no_sources() -> None:
    s = sweep(exclude=[{"model": "llama_7b"}])
    extra = [pp for pp in expand(s) if pp.point.role == "calibration"]
    assert extra and {pp.point.model.name for pp in extra} == {"gpt2-1.5b"}


def test_disk_lowers_the_scale_and_the_time_budget_drops_points() -> None:
    limit = 2.0
    lowered = [pp.point for pp in expand(sweep(calibration={"max_disk_gib": limit})) if pp.point.role == "calibration"]
    assert lowered
    for p in lowered:
        assert p.checkpoint.disk_bytes_required(p.layout().total_bytes) <= limit * GIB
    assert max(p.checkpoint.scale for p in lowered) < 0.1
    s = sweep(calibration={"budget_share": 10, "max_disk_gib": 1000})
    full = [pp for pp in expand(s) if pp.point.role == "calibration"]
    budget = s.estimate.run_seconds(0, 1) * 3.5  # room for a few runs' overhead only
    cut = [pp for pp in expand(sweep(calibration={"budget_s": budget, "max_disk_gib": 1000}))
           if pp.point.role == "calibration"]
    assert 0 < len(cut) < len(full)
    measure_s = sum(s.estimate.run_seconds(0, 1) for pp in expand(s) if pp.point.role == "measure")
    shared = [pp for pp in expand(sweep(calibration={"budget_share": 0.5, "max_disk_gib": 1000}))
              if pp.point.role == "calibration"]
    assert len(shared) < len(full) and sum(s.estimate.run_seconds(0, 1) for _ in shared) <= 0.5 * measure_s
    # the budget goes first to every shape's largest scale that fits it
    assert len({shape_of(pp.point) for pp in shared}) == len({shape_of(pp.point) for pp in full})


def test_memory_the_sweep_states_bounds_them() -> None:
    tight = sweep(estimate={"host_memory_gib": 0.01})
    assert not [pp for pp in auxiliary_points(tight, expand(tight)) if pp.point.role == "calibration"]


@pytest.mark.parametrize(("block", "key"), [("  max_scale: 2\n", "calibration.max_scale"),
                                            ("  scales: 0\n", "calibration.scales"),
                                            ("  budget: 10\n", "calibration.budget")])
def test_bad_values_are_one_line_naming_file_key_and_what_is_allowed(tmp_path: Path, block: str, key: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("study: x\nmodels: [gpt2-1.5b]\nfilesystems: {a: {path: /tmp/a}}\ncalibration:\n" + block)
    with pytest.raises(UserError) as exc:
        load_sweep(path)
    message = str(exc.value)
    assert "\n" not in message and str(path) in message and key in message and exc.value.exit_code == 2
    assert "allowed" in message or "less than or equal" in message or "greater than" in message


def one_small_shape(**calibration: Any) -> Any:
    return sweep(models=["gpt2-1.5b"], matrix={"zero_stage": 3, "io_mode": "direct"}, calibration=calibration)


def test_a_study_of_small_points_still_affords_its_calibration() -> None:
    """A share of a few tiny points' estimated time buys no larger run; `min_budget_s` does, and never more."""
    s = one_small_shape(max_disk_gib=1000)
    sources = CalibrationSources(s)
    for pp in expand(s):
        sources.add(pp)
    assert s.calibration.budget_share * sources.seconds < s.calibration.min_budget_s  # the share alone: too little
    made = sources.points(0)
    scales = sorted({pp.point.checkpoint.scale for pp in made})
    assert scales == ladder(0.001, s.calibration) and len(made) == len(scales) * s.repetitions
    assert sum(estimated_run_seconds(pp.point, s) for pp in made) <= sources.budget() == s.calibration.min_budget_s
    starved = one_small_shape(min_budget_s=0)
    assert not [pp for pp in expand(starved) if pp.point.role == "calibration"]


@pytest.mark.parametrize(("changes", "says"), [
    ({"calibration": {"enabled": False}}, "calibration.enabled"),
    ({"checkpoint": {"scale": 0.2}}, "calibration.below_scale 0.05"),
    ({"calibration": {"max_scale": 0.001}}, "calibration.max_scale 0.001"),
    ({"calibration": {"max_disk_gib": 0.0001}}, "calibration.max_disk_gib 0.0001 GiB"),
    ({"calibration": {"budget_s": 1}}, "calibration budget is 1 s (calibration.budget_s)"),
    ({"calibration": {"min_budget_s": 0, "budget_share": 0.01}}, "(calibration.budget_share and min_budget_s)"),
])
def test_plan_says_why_a_shape_gets_no_calibration(changes: dict[str, Any], says: str) -> None:
    s = sweep(models=["gpt2-1.5b"], matrix={"zero_stage": 3, "io_mode": "direct"}, **changes)
    shapes = shape_calibrations(s, expand(s))
    assert shapes and all(not c.scales and says in c.why_none for c in shapes), [c.why_none for c in shapes]
    calibrated = shape_calibrations(one_small_shape(), expand(one_small_shape()))
    assert all(c.scales and not c.why_none for c in calibrated)


@pytest.mark.parametrize(("value", "enabled"), [("off", False), ('"off"', False), ('"On"', True), ("{}", True)])
def test_the_switch_takes_yaml_booleans_and_the_words(tmp_path: Path, value: str, enabled: bool) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"study: x\nmodels: [gpt2-1.5b]\nfilesystems: {{a: {{path: /tmp/a}}}}\ncalibration: {value}\n")
    assert load_sweep(path).calibration.enabled is enabled


def test_another_word_names_what_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("study: x\nmodels: [gpt2-1.5b]\nfilesystems: {a: {path: /tmp/a}}\ncalibration: sometimes\n")
    with pytest.raises(UserError) as exc:
        load_sweep(path)
    assert "calibration" in str(exc.value) and "on, off, or a block of" in str(exc.value)
    assert "min_budget_s" in str(exc.value) and exc.value.exit_code == 2


def test_a_shape_left_without_calibration_by_others_says_so() -> None:
    s = sweep(models=["gpt2-1.5b"], matrix={"zero_stage": 3, "io_mode": ["buffered", "direct"]},
              calibration={"scales": 1, "repetitions": 1, "max_disk_gib": 1000})
    one_run = estimated_run_seconds(next(pp.point for pp in expand(s) if pp.point.role == "calibration"), s)
    tight = sweep(models=["gpt2-1.5b"], matrix={"zero_stage": 3, "io_mode": ["buffered", "direct"]},
                  calibration={"scales": 1, "repetitions": 1, "max_disk_gib": 1000, "budget_s": one_run * 1.5})
    shapes = shape_calibrations(tight, expand(tight))
    assert [bool(c.scales) for c in shapes].count(True) == 1
    starved = next(c for c in shapes if not c.scales)
    assert "spent on other shapes and fit groups first" in starved.why_none
    assert "(calibration.budget_s)" in starved.why_none
