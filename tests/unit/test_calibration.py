"""Calibration points: larger-scale runs per resource shape that projections are fitted from, bounded, switchable."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from studyctl.definition.auxiliary import auxiliary_points
from studyctl.definition.expand import expand
from studyctl.definition.shapes import shape_of
from studyctl.definition.sweep import load_sweep, parse_sweep
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
