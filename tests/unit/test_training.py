"""The training cost model against its formulas, and the sweep's strategy and training schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from studyctl.definition.checkpoint.layout import rank_files
from studyctl.definition.inputs import training as tc
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import plan_row
from studyctl.definition.planning.sweep import parse_sweep
from studyctl.errors import UserError

TOL = 1e-9


def test_job_mtbf_of_independent_node_failures() -> None:
    assert tc.job_mtbf_s(50_000 * 3600.0, 1000) == pytest.approx(180_000.0, rel=TOL)


def test_young_daly_interval_is_the_minimum_of_the_first_order_waste() -> None:
    cost, mtbf = 7.0, 40_000.0
    best = tc.young_interval_s(cost, mtbf)

    def waste(t: float) -> float:  # first order: checkpoint cost per unit time + lost work per unit time
        return cost / t + t / (2 * mtbf)

    assert waste(best) < waste(best * 0.9) and waste(best) < waste(best * 1.1)


def test_training_block_interval_and_mtbf() -> None:
    assert tc.TrainingSpec(step_s=2.0, interval_steps=300).interval_s == 600.0
    assert tc.TrainingSpec(interval_min=10).interval_s == 600.0
    assert tc.TrainingSpec(node_mtbf_h=1000, nodes=100).job_mtbf_s(4) == pytest.approx(36_000.0, rel=TOL)
    assert tc.TrainingSpec(node_mtbf_h=1000).job_mtbf_s(4) == pytest.approx(900_000.0, rel=TOL)
    assert tc.TrainingSpec(job_failures_per_day=2).job_mtbf_s(4) == pytest.approx(43_200.0, rel=TOL)
    assert tc.TrainingSpec().job_mtbf_s(4) is None
    with pytest.raises(ValueError, match="not both"):
        tc.TrainingSpec(interval_steps=10, interval_min=5)


BASE = {"study": "s", "models": ["llama_7b"], "filesystems": {"shared": {"path": "/tmp/s"},
                                                               "shm": {"path": "/dev/shm/t", "kind": "memory"}},
        "matrix": {"nodes": 2, "ranks_per_node": 2, "strategy": ["sync", "async", "tiered"]},
        "checkpoint": {"tier": "shm", "scale": 0.01},
        "training": {"simulated_step": {"compute_s": 0.2}, "node_mtbf_h": 1000}, "ceilings": "off"}


def _sweep(**changes: object) -> dict:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for key, value in changes.items():
        data[key] = value
    return data


def test_strategy_axis_expands_and_keeps_only_options_that_apply() -> None:
    points = [pp.point for pp in expand(parse_sweep(_sweep(), Path("s.yaml"))) if pp.point.role == "measure"]
    assert [p.checkpoint.strategy for p in points] == ["sync", "async", "tiered"]
    assert {p.filesystem for p in points} == {"shared"}, "a tier is not measured as shared storage by default"
    sync, asyn, tiered = (p.checkpoint for p in points)
    assert sync.tier is None and sync.step_s is None
    assert asyn.tier is None and asyn.step_s == 0.2
    assert tiered.tier == "shm" and tiered.step_s == 0.2


def test_sync_points_keep_their_ids_when_strategy_options_are_set() -> None:
    plain = _sweep(matrix={"nodes": 2, "ranks_per_node": 2})
    del plain["training"]
    plain["checkpoint"] = {"scale": 0.01}
    with_strategies = _sweep()
    ids = {pp.point.point_id for pp in expand(parse_sweep(with_strategies, Path("s.yaml")))}
    assert expand(parse_sweep(plain, Path("s.yaml")))[0].point.point_id in ids


@pytest.mark.parametrize(("changes", "message"), [
    ({"checkpoint": {"tier": "shared"}}, "checkpoint.tier: 'shared' is not one of shm"),
    ({"checkpoint": {"strategy": "tiered"}}, "strategy tiered needs checkpoint.tier"),
    ({"matrix": {"strategy": ["sink"]}}, "matrix.strategy.0: 'sink' is not one of 'sync', 'async', 'tiered'"),
    ({"matrix": {"restore": ["bcast"]}}, "'bcast' is not one of 'rank', 'full', 'broadcast'"),
    ({"training": {"interval_min": 5, "interval_steps": 4}}, "training: give interval_steps or interval_min"),
])
def test_bad_strategy_settings_are_one_line_errors(changes: dict, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        expand(parse_sweep(_sweep(**changes), Path("s.yaml")))


def test_plan_refuses_snapshots_that_do_not_fit_and_answers_the_inverse_question() -> None:
    sweep = parse_sweep(_sweep(estimate={"host_memory_gib": 0.5}), Path("s.yaml"))
    planned = expand(sweep)
    by_strategy = {pp.point.checkpoint.strategy: pp for pp in planned}
    assert by_strategy["async"].excluded and "async snapshots need" in by_strategy["async"].exclude_reason
    assert not by_strategy["sync"].excluded and not by_strategy["tiered"].excluded
    row = plan_row(by_strategy["sync"], sweep)
    interval, target = sweep.training.interval_s, sweep.training.target_overhead
    cost = row.sized.nominal_checkpoint_bytes / (row.needs.required_blocking_GiBps * (1 << 30))
    assert tc.checkpoint_share(interval, cost) == pytest.approx(target, rel=TOL)
    assert row.needs.job_mtbf_s == pytest.approx(1000 * 3600 / 2, rel=TOL)
    assert row.needs.required_blocking_GiBps_at_optimum > 0 and row.needs.required_background_GiBps is None
    tiered = plan_row(by_strategy["tiered"], sweep)
    assert tiered.needs.required_background_GiBps == pytest.approx(
        tiered.sized.nominal_checkpoint_bytes / interval / (1 << 30), rel=TOL)
    fits = expand(parse_sweep(_sweep(estimate={"host_memory_gib": 64}), Path("s.yaml")))
    assert not any(pp.excluded for pp in fits)
    asyn = plan_row(next(pp for pp in fits if pp.point.checkpoint.strategy == "async"), sweep)
    asyn_point = next(pp.point for pp in fits if pp.point.checkpoint.strategy == "async")
    host0 = sum(f.nbytes for r in range(2) for f in rank_files(asyn_point.model, asyn_point.parallelism, r, 0.01))
    assert asyn.sized.snapshot_memory_per_host_bytes == host0  # the shards of the host's own ranks


def test_plan_prints_the_bandwidth_that_keeps_overhead_under_the_target(tmp_path: Path) -> None:
    from tests.cli import run_cli

    data = _sweep(training={"step_s": 0.2, "interval_min": 30, "node_mtbf_h": 1000, "target_overhead": 0.1})
    data["filesystems"] = {"shared": {"path": str(tmp_path)}, "shm": {"path": "/dev/shm", "kind": "memory"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = run_cli("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    row = plan_row(expand(parse_sweep(data, path))[0], parse_sweep(data, path))
    assert "keep total waste (checkpoints + rework + restarts, Daly's complete model) under 10% of wall time" in text
    assert f"{row.needs.required_blocking_GiBps:.2f} GiB/s from the writers to shared storage keeps checkpoints at " \
           "10.0%" in text
    assert "into host memory (snapshot)" in text and "into the node-local tier" in text
