"""The `recovery:` axis: its forms, its points' ids, the restarts refused at plan time with the reason,
and what the backends launch for it (no MPI here: tests/integration/test_recovery.py runs the restarts)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from studyctl.backends.local import worker_command
from studyctl.backends.machine import Machine, misfit
from studyctl.backends.slurm.submit import executor, shape_of
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.checkpoint.recovery import Recovery, parse_recovery
from studyctl.definition.inputs.options import LocalOptions, SlurmOptions
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import plan_row
from studyctl.definition.planning.planned import PlannedPoint
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError
from worker.relaunch import world_command

TINY = {"name": "tiny", "num_layers": 4, "hidden_size": 512, "ffn_hidden_size": 1408, "num_attention_heads": 8,
        "num_kv_heads": 8, "vocab_size": 8000}


def sweep_file(tmp_path: Path, recovery: list[Any], **matrix: Any) -> Path:
    data = {"study": "r", "models": [TINY], "filesystems": {"fs": {"path": str(tmp_path)}},
            "matrix": {"nodes": 2, "ranks_per_node": 2, **matrix, "recovery": recovery},
            "checkpoint": {"writes": 1, "reads": 1}, "ceilings": False, "calibration": False}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def planned(tmp_path: Path, recovery: list[Any], **matrix: Any) -> list[PlannedPoint]:
    return expand(load_sweep(sweep_file(tmp_path, recovery, **matrix)))


def test_the_forms_of_the_axis() -> None:
    assert parse_recovery("none") is None
    assert parse_recovery("same") == Recovery(scenario="same")
    assert parse_recovery({"lost_nodes": 1}) == Recovery(scenario="lost_nodes", lost_nodes=1)
    shrink = parse_recovery({"shrink_to": 2, "tensor_parallel": 1})
    assert shrink == Recovery(scenario="shrink", world_size=2, tensor_parallel=1)
    assert shrink.label() == "shrink_to 2, tensor_parallel 1"
    assert parse_recovery({"grow_to": 8}).label() == "grow_to 8"


@pytest.mark.parametrize(("value", "words"), [
    ("sideways", "is not a recovery scenario; allowed: none, same"),
    ({"shrink_to": 2, "grow_to": 8}, "give exactly one of lost_nodes, shrink_to, grow_to"),
    ({"shrink_to": 0}, "shrink_to: 0 is not a whole number ≥ 1"),
    ({"lost_nodes": 1, "tensor_parallel": 2}, "a layout change needs shrink_to or grow_to"),
    ({"grow_to": 8, "tensor_paralel": 1}, "give exactly one of"),
])
def test_a_bad_value_is_one_line_naming_file_line_and_key(tmp_path: Path, value: Any, words: str) -> None:
    path = sweep_file(tmp_path, ["same", value])
    with pytest.raises(UserError) as exc:
        load_sweep(path)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"{path}:") and "matrix.recovery.1" in message
    assert words in message


def test_points_without_recovery_keep_their_ids_and_each_scenario_is_its_own_point(tmp_path: Path) -> None:
    points = [pp.point for pp in planned(tmp_path, ["none", "same", {"shrink_to": 2}, {"grow_to": 8}])]
    plain, *restarts = points
    assert plain.recovery is None and "recovery" not in plain.canonical()
    assert plain.point_id == plain.model_copy(update={"recovery": None}).point_id
    assert len({p.point_id for p in points}) == 4
    for p in restarts:
        assert p.recovery is not None and p.canonical()["recovery"]["scenario"] == p.recovery.scenario
        assert Point.model_validate(p.canonical()).point_id == p.point_id  # the result file's point is the point
        assert p.recovery.step.compute_s > 0  # the first step after the restore: the sweep's simulated step


@pytest.mark.parametrize(("value", "matrix", "reason"), [
    ({"shrink_to": 3}, {}, "shrink_to 3: not a whole number of nodes of 2 ranks"),
    ({"shrink_to": 4}, {}, "shrink_to 4: must be fewer ranks than the point's 4"),
    ({"grow_to": 2}, {}, "grow_to 2: must be more ranks than the point's 4"),
    ({"shrink_to": 2, "tensor_parallel": 4}, {}, "not a multiple of tensor_parallel"),
    ({"grow_to": 6}, {"tensor_parallel": 4}, "not a multiple of tensor_parallel×pipeline_parallel = 4×1"),
    ({"lost_nodes": 1}, {}, "lost_nodes 1: needs strategy tiered"),
])
def test_impossible_restarts_are_infeasible_at_plan_time_with_the_reason(tmp_path: Path, value: Any,
                                                                        matrix: dict[str, Any], reason: str) -> None:
    pp = planned(tmp_path, [value], **matrix)[0]
    assert pp.exclusion is not None and pp.exclusion.infeasible
    assert reason in pp.exclusion.reason and "\n" not in pp.exclusion.reason


def test_exclude_rules_match_a_scenario_in_the_sweeps_words(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, ["same", {"grow_to": 8}])
    data = yaml.safe_load(path.read_text())
    data["exclude"] = [{"recovery": {"grow_to": 8}, "reason": "no room"}]
    path.write_text(yaml.safe_dump(data))
    reasons = [pp.exclude_reason for pp in expand(load_sweep(path))]
    assert reasons == [None, "no room"]


def test_a_restart_is_sized_for_the_larger_world(tmp_path: Path) -> None:
    grow = next(pp.point for pp in planned(tmp_path, [{"grow_to": 8}]))
    assert misfit(grow, Machine(cores=1, available_memory_bytes=None), ranks_per_core=6) is not None  # 8 > 6
    assert misfit(grow, Machine(cores=1, available_memory_bytes=None), ranks_per_core=8) is None
    launch = type("L", (), {"point": grow, "time_limit_s": None})()
    options = SlurmOptions(partition="debug", time_limit_min=5)
    assert shape_of(options, launch) == (4, 2, 5, True)  # type: ignore[arg-type]
    ex = executor(options, tmp_path, "r", shape_of(options, launch), "m", 1)  # type: ignore[arg-type]
    assert ex.parameters["use_srun"] is False and ex.parameters["nodes"] == 4


def test_plan_counts_the_node_hours_of_the_allocation_a_restart_holds(tmp_path: Path) -> None:
    """Writing on 2 nodes and restarting onto 8 ranks of 2 per node holds 4 nodes for the whole run."""
    path = sweep_file(tmp_path, ["none", "same", {"grow_to": 8}, {"shrink_to": 2}])
    sweep = load_sweep(path)
    rows = {r.recovery: r for r in (plan_row(pp, sweep) for pp in expand(sweep))}
    for label, nodes in (("none", 2), ("same", 2), ("grow_to 8", 4), ("shrink_to 2", 2)):
        row = rows[label]
        # the row shows its seconds rounded: 1% apart at most, where a wrong node count is 2×
        assert row.sized.node_hours == pytest.approx(nodes * row.sized.estimated_seconds / 3600, rel=0.01), label


def test_the_local_backend_starts_the_relaunch_driver(tmp_path: Path) -> None:
    same = next(pp.point for pp in planned(tmp_path, ["same"]))
    paths = type("P", (), {"task": tmp_path / "task.json"})()
    launch = type("L", (), {"point": same, "paths": paths})()
    command = worker_command(launch, LocalOptions(), mpiexec="/x/mpiexec")  # type: ignore[arg-type]
    assert command[:4] == [sys.executable, "-m", "worker.relaunch", str(tmp_path / "task.json")]
    assert command[4:] == ["mpiexec", "/x/mpiexec"]
    assert world_command("mpiexec", ["mpiexec"], 8, 2) == ["mpiexec", "-n", "8"]
    assert world_command("srun", ["srun", "--mpi=pmi2"], 8, 2) == ["srun", "--mpi=pmi2", "-N", "4", "-n", "8",
                                                                   "--ntasks-per-node=2"]


def test_ceiling_and_calibration_copies_restart_nothing(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, ["same"])
    data = yaml.safe_load(path.read_text())
    data["ceilings"] = "on"
    path.write_text(yaml.safe_dump(data))
    ceilings = [pp.point for pp in expand(load_sweep(path)) if pp.point.role == "ceiling"]
    assert ceilings and all(p.recovery is None for p in ceilings)
