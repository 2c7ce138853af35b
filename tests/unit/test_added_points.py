"""The points studyctl adds itself (ceilings, calibration) are its own business: they never decide whether a sweep
is the same study, and where they would not fit (free space, memory, time limit) they are left out with a line
while the measure points run; calibration lowers its scales to the free space first."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from studyctl.attempt.judged import Judged
from studyctl.attempt.paths import StudyPaths
from studyctl.definition.planning.calibration import FREE_SPACE_STEPS
from studyctl.definition.planning.expand import expand, measure_points
from studyctl.definition.planning.fit_added import within_capacity
from studyctl.definition.planning.plan import Capacity, plan_row
from studyctl.definition.planning.planned import PlannedPoint
from studyctl.definition.planning.sweep import SweepFile, parse_sweep
from studyctl.errors import UserError
from studyctl.study.same_study import check_same_study
from studyctl.units import MIB

# A reported refusal: llama_7b on one and two nodes, one rank each, scale 0.0005, ceilings and calibration on.
RECORDED: dict[str, Any] = {
    "study": "s7", "models": ["llama_7b"], "matrix": {"nodes": [1, 2], "ranks_per_node": 1},
    "filesystems": {"scratch": {"path": "/tmp/scratch"}}, "checkpoint": {"scale": 0.0005, "writes": 1, "reads": 1},
}


def changed(**changes: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(RECORDED))
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return data


def text(data: dict[str, Any]) -> str:
    return json.dumps(data)  # JSON is YAML


def study(tmp_path: Path, recorded: dict[str, Any]) -> StudyPaths:
    paths = StudyPaths(tmp_path / "results" / "s7")
    paths.root.mkdir(parents=True)
    paths.sweep_copy.write_text(text(recorded))
    return paths


def planned(data: dict[str, Any]) -> list[PlannedPoint]:
    return expand(parse_sweep(data, Path("new.yaml")))


def added_ids(points: list[PlannedPoint]) -> set[str]:
    return {pp.point.point_id for pp in points if pp.point.role != "measure"}


TWO_MODELS = changed(models=["llama_7b", "llama3-8b"])
SAME_STUDY = {
    "narrowed by exclude": (RECORDED, changed(exclude=[{"nodes": 2, "reason": "one node only"}])),
    "widened by a model": (RECORDED, TWO_MODELS),
    "the larger of two models excluded": (TWO_MODELS, {**TWO_MODELS, "exclude": [{"model": "llama3-8b"}]}),
    "widened by nodes": (RECORDED, changed(matrix={"nodes": [1, 2, 4]})),
    "widened by ZeRO stage": (RECORDED, changed(matrix={"zero_stage": [1, 3]})),
    "widened by io_mode": (RECORDED, changed(matrix={"io_mode": ["buffered", "direct"]})),
    "widened by a filesystem": (RECORDED, changed(filesystems={"fast": {"path": "/tmp/fast"}})),
    "more repetitions": (RECORDED, changed(repetitions=3)),
    "ceilings and calibration off": (RECORDED, changed(ceilings="off", calibration="off")),
}


@pytest.mark.parametrize("case", SAME_STUDY)
def test_a_default_study_narrowed_or_widened_is_the_same_study(tmp_path: Path, case: str) -> None:
    old, new = SAME_STUDY[case]
    check_same_study(study(tmp_path, old), planned(new), text(new))  # no UserError


@pytest.mark.parametrize("case", ["narrowed by exclude", "widened by a model", "the larger of two models excluded"])
def test_changes_that_leave_added_points_out_do_supersede_them(case: str) -> None:
    """What the same-study rule must ignore: these changes do leave some recorded added points out."""
    old, new = SAME_STUDY[case]
    assert added_ids(planned(old)) - added_ids(planned(new))


@pytest.mark.parametrize("edit", [changed(checkpoint={"scale": 0.001}), changed(matrix={"nodes": [2]}),
                                  changed(models=["llama3-8b"])])
def test_a_sweep_that_drops_or_changes_measure_points_is_another_study(tmp_path: Path, edit: dict[str, Any]) -> None:
    with pytest.raises(UserError, match="measured points are not in this one") as err:
        check_same_study(study(tmp_path, RECORDED), planned(edit), text(edit))
    assert "exclude them" in str(err.value)


def test_the_recorded_sweeps_added_points_are_never_counted(tmp_path: Path) -> None:
    """Every measure point kept, none of the recorded added points: the same study."""
    new = planned(changed(ceilings="off", calibration="off"))
    assert not added_ids(new) and added_ids(planned(RECORDED))
    check_same_study(study(tmp_path, RECORDED), new, text(RECORDED) + "\n")


# ---- added points where they run

SMALL: dict[str, Any] = {
    "study": "g", "models": ["gpt2-125m"], "matrix": {"nodes": [1, 2], "ranks_per_node": 1},
    "filesystems": {"scratch": {"path": "/tmp/scratch"}},
    "checkpoint": {"scale": 0.002, "writes": 1, "reads": 1, "buffer_mib": 8, "block_mib": 4},
}


def small(**changes: Any) -> SweepFile:
    return parse_sweep({**SMALL, **changes}, Path("small.yaml"))


def capacity(free: int | None = None, memory: int | None = None) -> Capacity:
    return Capacity({"scratch": free}, {"scratch": "/tmp/scratch"}, memory, "the test's host")


def as_run(sweep: SweepFile, cap: Capacity, limit: int | None = None) -> tuple[list[PlannedPoint], list[str]]:
    notes: list[str] = []
    return list(within_capacity(sweep, measure_points(sweep), cap, lambda p: limit, notes)), notes


def need(sweep: SweepFile, pp: PlannedPoint) -> int:
    return int(plan_row(pp, sweep).sized.disk_bytes_required)


def test_with_room_for_everything_nothing_is_left_out() -> None:
    s = small()
    points, notes = as_run(s, capacity(free=1 << 50, memory=1 << 50), limit=10**9)
    assert [pp.point.point_id for pp in points] == [pp.point.point_id for pp in expand(s)] and not notes


def test_calibration_is_lowered_to_the_free_space_and_says_so() -> None:
    s = small()
    measured = [pp for pp in expand(s) if pp.point.role == "measure"]
    wanted = [pp for pp in expand(s) if pp.point.role == "calibration"]
    free = 3 * max(need(s, pp) for pp in measured)
    assert max(need(s, pp) for pp in wanted) > free  # the default calibration would not fit
    points, notes = as_run(s, capacity(free=free))
    calibration = [pp for pp in points if pp.point.role == "calibration"]
    assert calibration and all(need(s, pp) <= free for pp in calibration)
    assert all(pp.point.checkpoint.scale >= 1.5 * 0.002 for pp in calibration)  # still tells the fit something
    assert [pp for pp in points if pp.point.role == "measure"] == measured
    assert len(notes) == 2 and all("would need up to" in n and "free on filesystem scratch" in n and
                                   "runs at scale" in n for n in notes)
    # a scale on a coarse grid: a little more or less free space at the next submit names the same points
    scales = [pp.point.checkpoint.scale for pp in calibration]
    mantissas = {round(x / 10 ** math.floor(math.log10(x)), 6) for x in scales}
    assert mantissas <= set(FREE_SPACE_STEPS)
    for other in (free * 101 // 100, free * 99 // 100):
        again, _ = as_run(s, capacity(free=other))
        assert {pp.point.point_id for pp in again} == {pp.point.point_id for pp in points}


def test_no_room_for_any_calibration_scale_leaves_it_out_with_a_line_and_the_study_runs() -> None:
    s = small()
    measured = [pp for pp in expand(s) if pp.point.role == "measure"]
    free = max(need(s, pp) for pp in measured) * 11 // 10
    points, notes = as_run(s, capacity(free=free))
    assert not [pp for pp in points if pp.point.role == "calibration"]
    assert [pp for pp in points if pp.point.role == "measure"] == measured
    about = [n for n in notes if n.startswith("calibration of shape")]
    assert len(about) == 2 and all("gets none" in n for n in about)


def test_added_points_over_the_hosts_memory_are_left_out_never_a_measure_point() -> None:
    s = small()
    points, notes = as_run(s, capacity(memory=64 * MIB))
    assert {pp.point.role for pp in points} == {"measure"}  # measure points are the backend's to refuse
    dropped = [pp for pp in expand(s) if pp.point.role != "measure"]
    assert len(notes) == len(dropped)
    for pp, line in zip(dropped, notes, strict=True):
        assert line.startswith(f"{pp.point.role} point {pp.point.point_id} (gpt2-125m ZeRO-1 at scale ")
        assert "of memory" in line and "64.00 MiB" in line and "short" in line and "the measured points run" in line


def test_added_points_over_the_time_limit_are_left_out() -> None:
    s = small(estimate={"GiBps_per_node": 0.001, "overhead_s": 1})
    measured_s = max(plan_row(pp, s).sized.estimated_seconds for pp in expand(s) if pp.point.role == "measure")
    calibration_s = max(plan_row(pp, s).sized.estimated_seconds for pp in expand(s) if pp.point.role == "calibration")
    limit = int(measured_s + (calibration_s - measured_s) / 2)
    points, notes = as_run(s, capacity(), limit=limit)
    assert {pp.point.role for pp in points if plan_row(pp, s).sized.estimated_seconds > limit} == set()
    assert any(pp.point.role == "measure" for pp in points)
    assert notes and all(f"over the {limit:,} s it may run" in n for n in notes)


def test_an_added_result_is_judged_while_its_shape_is_measured() -> None:
    assert Judged(shapes=frozenset({"a"})).added_judged("a")
    assert not Judged(shapes=frozenset({"a"})).added_judged("b")
    assert Judged().added_judged("b")  # no readable sweep copy: everything is judged
