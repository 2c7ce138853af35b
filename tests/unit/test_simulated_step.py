"""The sweep's simulated step reaches async/tiered points; tiered points replace a node unless told otherwise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from studyctl.definition.checkpoint.points import CheckpointOptions, Point
from studyctl.definition.inputs.training import CPU_DISPATCH_SHARE, DISPATCH_SHARE, DISPATCH_SHARES, SimulatedStep
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.definition.result.result_schema import Result
from studyctl.errors import UserError
from tests.resultgen import make_point, result_dict

BASE: dict[str, Any] = {
    "study": "step", "models": ["gpt2-125m"],
    "filesystems": {"shared": {"path": "/tmp/shared"}, "shm": {"path": "/dev/shm/t", "kind": "memory"}},
    "ceilings": "off",
    "matrix": {"nodes": 2, "ranks_per_node": 1, "zero_stage": 1, "strategy": ["sync", "async", "tiered"]},
    "checkpoint": {"tier": "shm", "scale": 0.01},
    "training": {"step_s": 3.0, "simulated_step": {"compute_s": 0.2, "compute": "cpu", "allreduce_mib": 4}}}


def points(tmp_path: Path, **changes: Any) -> list[Point]:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return [pp.point for pp in expand(load_sweep(path)) if pp.point.role == "measure"]


def test_the_simulated_step_and_not_the_real_step_reaches_background_points(tmp_path) -> None:
    sync, asyn, tiered = (p.checkpoint for p in points(tmp_path))
    assert (sync.step_s, sync.compute, sync.allreduce_mib) == (None, None, None)
    for opts in (asyn, tiered):
        assert (opts.step_s, opts.compute, opts.allreduce_mib) == (0.2, "cpu", 4)
    assert asyn.simulated_training_s() == pytest.approx(asyn.simulated_steps() * 0.2)


def test_tiered_points_replace_one_node_unless_the_sweep_says_otherwise(tmp_path: Path) -> None:
    by = {p.checkpoint.strategy: p.checkpoint for p in points(tmp_path)}
    assert by["tiered"].replaced_nodes == 1
    assert by["sync"].replaced_nodes == by["async"].replaced_nodes == 0, "no tier, nothing to replace"
    chosen = points(tmp_path, checkpoint={"replaced_nodes": 0})
    (explicit,) = [p.checkpoint for p in chosen if p.checkpoint.strategy == "tiered"]
    assert explicit.replaced_nodes == 0, "a no-failure restore when asked for"
    swept = points(tmp_path, matrix={"strategy": "tiered", "replaced_nodes": [0, 2]})
    assert [p.checkpoint.replaced_nodes for p in swept] == [0, 2], "every node replaced is allowed"


@pytest.mark.parametrize(("changes", "key"), [
    ({"checkpoint": {"replaced_nodes": 3}}, "checkpoint.replaced_nodes"),
    ({"matrix": {"replaced_nodes": [1, 5]}}, "matrix.replaced_nodes"),
])
def test_more_replaced_nodes_than_the_point_has_is_refused_in_one_line(tmp_path: Path, changes: dict, key: str
                                                                      ) -> None:
    with pytest.raises(UserError) as err:
        points(tmp_path, **changes)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 's.yaml'}: {key}: ") and "more than the point's nodes 2" in message
    assert "allowed 0 to 2" in message and "\n" not in message


def test_sync_points_keep_their_ids_and_stored_points_round_trip(tmp_path: Path) -> None:
    plain = make_point()
    assert plain.point_id == Point.model_validate(plain.canonical()).point_id
    for p in points(tmp_path):
        assert Point.model_validate(p.canonical()).point_id == p.point_id, p.checkpoint.strategy
        assert Point.model_validate(json.loads(p.model_dump_json())).point_id == p.point_id


def test_an_older_tiered_result_keeps_its_id_and_its_no_failure_restore() -> None:
    """Before replaced_nodes defaulted to 1 for tiered points, 0 was the default and left out of the id."""
    old = make_point(strategy="tiered", tier="shm", step_s=0.05)
    stored = json.loads(old.model_dump_json())
    assert stored["checkpoint"]["replaced_nodes"] == 0 and "replaced_nodes" not in old.canonical()["checkpoint"]
    assert Point.model_validate(stored).point_id == old.point_id


def test_results_without_the_new_fields_still_validate() -> None:
    point = make_point(strategy="async", step_s=0.05)
    data = result_dict(point, [1.0])
    data["strategy"] = {"strategy": "async", "restore_mode": "rank", "step_s": 0.05, "checkpoints": [
        {"phase": "write", "index": 0, "blocking_s": 0.1, "compute_steps": 3, "compute_slowdown": 0.2,
         "interference_s": 0.05}]}
    result = Result.model_validate(data)
    assert result.strategy is not None
    (timing,) = result.strategy.checkpoints
    assert timing.idle_step_s_mean is None and timing.interference_ci_s is None
    assert result.provenance.host_cores is None and result.provenance.launch_s is None


def test_interference_may_be_negative_in_a_result() -> None:
    opts = CheckpointOptions(strategy="async", step_s=0.05)
    data = result_dict(make_point(strategy=opts.strategy, step_s=0.05), [1.0])
    data["strategy"] = {"strategy": "async", "restore_mode": "rank", "checkpoints": [
        {"phase": "write", "index": 0, "interference_s": -0.3, "compute_slowdown": -0.12,
         "interference_ci_s": 0.4}]}
    (timing,) = Result.model_validate(data).strategy.checkpoints  # type: ignore[union-attr]
    assert timing.interference_s == -0.3


@pytest.mark.parametrize("compute", sorted(DISPATCH_SHARES))
def test_the_dispatch_share_reaches_background_points_and_the_default_keeps_their_ids(tmp_path: Path,
                                                                                      compute: str) -> None:
    accelerator = {"simulated_step": {"compute_s": 0.2, "compute": compute}}
    default = points(tmp_path, training=accelerator)
    assert all(p.checkpoint.dispatch_share is None for p in default), "the default travels as None"
    assert all("dispatch_share" not in p.canonical()["checkpoint"] for p in default)
    explicit = points(tmp_path, training={"simulated_step": {**accelerator["simulated_step"],
                                                             "dispatch_share": DISPATCH_SHARES[compute]}})
    assert [p.point_id for p in explicit] == [p.point_id for p in default], "the default written out: same points"
    chosen = points(tmp_path, training={"simulated_step": {**accelerator["simulated_step"], "dispatch_share": 0.4}})
    sync, asyn, tiered = (p.checkpoint for p in chosen)
    assert (sync.dispatch_share, asyn.dispatch_share, tiered.dispatch_share) == (None, 0.4, 0.4)
    assert chosen[0].point_id == default[0].point_id, "a sync point runs no step"
    assert {p.point_id for p in chosen[1:]}.isdisjoint(p.point_id for p in default[1:]), "another step: new points"
    for p in chosen:
        assert Point.model_validate(p.canonical()).point_id == p.point_id
        assert Point.model_validate(json.loads(p.model_dump_json())).point_id == p.point_id


def test_a_recovery_steps_default_share_stays_out_of_its_id() -> None:
    for compute, share in DISPATCH_SHARES.items():
        step = SimulatedStep(compute_s=0.2, compute=compute)
        assert step.dispatch_share == share, "an unset share is the compute model's own default"
        assert "dispatch_share" not in step.model_dump() and SimulatedStep.model_validate(step.model_dump()) == step
    assert SimulatedStep(compute_s=0.2, dispatch_share=0.4).model_dump()["dispatch_share"] == 0.4
    cpu = SimulatedStep(compute="cpu", dispatch_share=DISPATCH_SHARE)
    assert cpu.model_dump()["dispatch_share"] == DISPATCH_SHARE != CPU_DISPATCH_SHARE, "another model's default"


@pytest.mark.parametrize(("step", "says"), [
    ({"compute": "cpu", "dispatch_share": -0.1}, "greater than or equal to 0"),
    ({"dispatch_share": 1.5}, "less than or equal to 1"),
])
def test_a_share_that_cannot_apply_is_refused_in_one_line(tmp_path: Path, step: dict, says: str) -> None:
    with pytest.raises(UserError) as err:
        points(tmp_path, training={"simulated_step": step})
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 's.yaml'}:") and "dispatch_share" in message and says in message
    assert "\n" not in message


@pytest.mark.parametrize("compute", [["cpu"], {"cpu": 1}, "gpu"])
def test_a_compute_model_that_is_none_is_refused_in_one_line_naming_the_models(tmp_path: Path, compute: Any) -> None:
    """No model to take a default share from: the compute key's own error, not a traceback."""
    with pytest.raises(UserError) as err:
        points(tmp_path, training={"simulated_step": {"compute": compute}})
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 's.yaml'}:") and "simulated_step.compute" in message
    assert "'accelerator', 'cpu'" in message and "\n" not in message
