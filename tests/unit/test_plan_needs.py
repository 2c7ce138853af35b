"""`studyctl plan`'s inverse answer (total waste at the optimum, numerically checked), its stated inputs, the bytes
a restore reads from storage apart from those a broadcast delivers, and the async snapshot memory of a host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from studyctl.definition.checkpoint.layout import Parallelism, rank_files
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import storage_read_bytes
from studyctl.definition.planning.strategies import host_snapshot_bytes
from studyctl.definition.planning.sweep import parse_sweep
from studyctl.units import GIB, format_bytes
from tests.cli import run_cli
from tests.unit.test_waste_model import numeric_optimum


def _sweep(tmp_path: Path, **sections: Any) -> Path:
    data = {"study": "n", "models": ["llama_7b"], "filesystems": {"fs": {"path": str(tmp_path)}}, "ceilings": "off",
            "matrix": {"nodes": 2, "ranks_per_node": 2}, **sections}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _json(path: Path) -> list[dict]:
    proc = run_cli("plan", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _text(path: Path) -> str:
    proc = run_cli("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    return " ".join(proc.stdout.split())


@pytest.mark.parametrize("restore", ["rank", "full", "broadcast"])
@pytest.mark.parametrize("restart_s", [0.0, 240.0])
def test_bandwidth_at_the_optimum_holds_the_numerically_minimised_total_waste_at_the_target(
        tmp_path: Path, restore: str, restart_s: float) -> None:
    path = _sweep(tmp_path, matrix={"nodes": 2, "ranks_per_node": 4, "zero_stage": 0, "restore": restore},
                  training={"node_mtbf_h": 2000, "nodes": 512, "restart_s": restart_s, "target_overhead": 0.08})
    (row,) = _json(path)
    bandwidth = row["required_blocking_GiBps_at_optimum"] * GIB
    cost = row["nominal_checkpoint_bytes"] / bandwidth
    restart = restart_s + row["restore_storage_bytes"] / bandwidth
    mtbf = 2000 * 3600 / 512
    assert row["job_mtbf_s"] == pytest.approx(mtbf, rel=1e-12)
    _, waste = numeric_optimum(cost, mtbf, restart)
    assert waste == pytest.approx(0.08, rel=0.02)
    assert row["total_waste_at_optimum"] == pytest.approx(waste, rel=0.02)
    # 10% less bandwidth wastes more than the target: the answer is the smallest
    _, slower = numeric_optimum(cost / 0.9, mtbf, restart_s + row["restore_storage_bytes"] / (0.9 * bandwidth))
    assert slower > 0.08
    # at the configured interval: the checkpoint share is the target, and rework and restarts come on top
    assert row["checkpoint_share_at_interval"] == pytest.approx(0.08, rel=1e-9)
    assert row["total_waste_at_interval"] > 0.08 + row["interval_s"] / 2 / mtbf * 0.9


def test_restarts_that_alone_exceed_the_target_are_said_to_be_unreachable(tmp_path: Path) -> None:
    path = _sweep(tmp_path, training={"job_failures_per_day": 24, "restart_s": 600})  # 1 − e^(−600/3600): 15%
    (row,) = _json(path)
    assert row["required_blocking_GiBps_at_optimum"] is None
    assert row["restart_waste_floor"] == pytest.approx(0.1535, abs=1e-3)
    assert "not reachable: restarts alone waste 15.4%" in _text(path)


def test_plan_states_the_inputs_and_the_assumptions(tmp_path: Path) -> None:
    path = _sweep(tmp_path, checkpoint={"scale": 0.01},
                  training={"step_s": 2.0, "interval_steps": 600, "simulated_step": {"compute_s": 0.25},
                            "node_mtbf_h": 1000, "nodes": 64})
    text = _text(path)
    assert "keep total waste (checkpoints + rework + restarts" in text and "under 5% of wall time" in text
    assert "20 min of training between checkpoints (real step 2 s; the workers' simulated step 0.25 s)" in text
    assert "0 s assumed: training.restart_s is not set" in text and "launch time measured" in text
    assert "job: 64 node(s), node MTBF 1000 h → job MTBF 15.6 h" in text
    assert "the job's 64 nodes exceed the point's 2: the per-node rates are assumed to hold" in text
    assert "full-size (nominal) checkpoint bytes; the points write 0.01 of it" in text
    (row,) = _json(path)
    assert "keeps checkpoints at 5.0%; total waste then " + f"{row['total_waste_at_interval']:.1%}" in text
    assert f"at the optimum: {row['required_blocking_GiBps_at_optimum']:.2f} GiB/s keeps total waste at 5.0%" in text
    assert row["restart_s"] == 0.0 and row["restart_s_given"] is False
    assert (row["job_nodes"], row["point_nodes"], row["step_s"], row["simulated_step_s"]) == (64, 2, 2.0, 0.25)
    given = _sweep(tmp_path, training={"node_mtbf_h": 1000, "restart_s": 90})
    text = _text(given)
    assert "restart (relaunch before the restore) 90 s (training.restart_s)" in text
    assert "assumed to hold" not in text and "job: 2 node(s)" in text


def test_broadcast_restore_reads_from_storage_what_was_written_and_delivers_the_rest(tmp_path: Path) -> None:
    """Llama 3 70B on 1024 ranks (TP8 PP4, ZeRO-1): storage serves the checkpoint once; the replicas' weights come
    by broadcast. Every rank's full restore reads them all from storage."""
    path = _sweep(tmp_path, models=["llama3-70b"],
                  matrix={"nodes": 128, "ranks_per_node": 8, "tensor_parallel": 8, "pipeline_parallel": 4,
                          "zero_stage": 1, "restore": ["broadcast", "full"]})
    bcast, full = _json(path)
    assert bcast["storage_read_bytes_per_restore"] == bcast["checkpoint_bytes"]
    assert bcast["broadcast_bytes_per_restore"] == full["storage_read_bytes_per_restore"] - bcast["checkpoint_bytes"]
    assert bcast["read_bytes_per_restore"] == full["read_bytes_per_restore"]  # what the ranks hold afterwards
    assert full["broadcast_bytes_per_restore"] == 0
    assert bcast["restore_storage_bytes"] == bcast["nominal_checkpoint_bytes"]
    assert full["storage_read_bytes_per_restore"] > 5 * full["checkpoint_bytes"]
    text = _text(path)
    read = sum(r["storage_read_bytes_per_restore"] * r["reads"] for r in (bcast, full))
    assert f"to read {format_bytes(read)} from storage (and " \
           f"{format_bytes(bcast['broadcast_bytes_per_restore'] * bcast['reads'])} delivered by MPI broadcast)" in text


@pytest.mark.parametrize(("zero", "tp", "pp", "rpn", "shift", "subset"), [
    (0, 1, 1, 4, 0, None), (1, 2, 1, 2, 1, None), (2, 2, 2, 4, 3, None), (3, 2, 1, 4, 1, None), (1, 2, 2, 3, 0, 24),
])
def test_storage_bytes_of_a_broadcast_restore_are_what_each_worker_reads(
        tmp_path: Path, zero: int, tp: int, pp: int, rpn: int, shift: int, subset: int | None) -> None:
    """Planned against worker.restore.broadcast_split, rank by rank: a rank reads its own files; the root of each
    replica group (group rank 0: the lowest rank of that colour) also reads the group's replicated files."""
    from worker.restore import broadcast_split

    checkpoint: dict[str, Any] = {"rank_shift": shift, "scale": 0.01, "restore": "broadcast"}
    if subset:
        checkpoint["subset_world_size"] = subset
    sweep = parse_sweep({"study": "b", "models": ["gpt2-125m"], "filesystems": {"fs": {"path": str(tmp_path)}},
                         "ceilings": "off", "calibration": "off",
                         "matrix": {"nodes": 4, "ranks_per_node": rpn, "zero_stage": zero, "tensor_parallel": tp,
                                    "pipeline_parallel": pp},
                         "checkpoint": checkpoint}, tmp_path / "s.yaml")
    (pp_,) = expand(sweep)
    point = pp_.point
    par = point.parallelism
    roots: set[int] = set()
    total = 0
    for rank in range(point.world_size):
        colour, own, shared = broadcast_split(point, par, rank)
        total += sum(f.nbytes for f in own)
        if colour not in roots:
            roots.add(colour)
            total += sum(f.nbytes for f in shared)
    assert storage_read_bytes(point.model, par, point.checkpoint) == total


@pytest.mark.parametrize(("zero", "tp", "pp", "dp", "rpn"), [
    (1, 1, 1, 16, 8), (2, 2, 1, 8, 4), (1, 2, 2, 4, 3), (0, 1, 2, 6, 4), (3, 2, 1, 6, 5), (1, 4, 2, 3, 6),
])
def test_host_snapshot_is_the_worst_hosts_sum_of_its_ranks_shards(zero: int, tp: int, pp: int, dp: int,
                                                                  rpn: int) -> None:
    model, par = lookup("gpt2-125m"), Parallelism(tp, pp, dp, zero)
    per_rank = [sum(f.nbytes for f in rank_files(model, par, r)) for r in range(par.ranks)]
    hosts = [sum(per_rank[h:h + rpn]) for h in range(0, par.ranks, rpn)]
    assert host_snapshot_bytes(model, par, rpn) == max(hosts)


def test_zero1_async_snapshot_counts_the_shards_a_host_really_holds(tmp_path: Path) -> None:
    """Llama 7B, ZeRO-1, DP 16 on 2 nodes × 8: only rank 0 holds the weights. Counting every rank as holding the
    largest shard asked for about 2.5x the memory host 0 needs, and excluded a point that fits. An async rank
    holds its shards twice (the snapshot and the simulated device state it copies), under either rule."""
    model, par = lookup("llama_7b"), Parallelism(1, 1, 16, 1)
    per_rank = [sum(f.nbytes for f in rank_files(model, par, r)) for r in range(16)]
    real, old_rule = sum(per_rank[:8]), 8 * max(per_rank)
    assert old_rule > 2 * real

    def planned(memory_gib: float) -> dict:
        path = _sweep(tmp_path, matrix={"nodes": 2, "ranks_per_node": 8, "zero_stage": 1, "strategy": "async"},
                      estimate={"host_memory_gib": memory_gib})
        (row,) = _json(path)
        return row

    between = planned((2 * real + 2 * old_rule) / 2 / GIB)
    assert not between["excluded"], between["exclude_reason"]
    assert between["snapshot_memory_per_host_bytes"] == real
    assert between["worker_memory_per_point_bytes"] < 2 * between["worker_memory_per_host_bytes"], \
        "host 1 holds optimizer shards only: the point needs less than twice the worst host"
    too_small = planned(2 * real / GIB)  # the shards alone fill it: buffers and interpreters do not fit
    assert too_small["excluded"] and "async snapshots need" in too_small["exclude_reason"]


def test_without_a_failure_figure_plan_says_the_waste_is_the_checkpoint_share(tmp_path: Path) -> None:
    path = _sweep(tmp_path, training={"interval_min": 10})
    (row,) = _json(path)
    assert row["job_mtbf_s"] is None and row["required_blocking_GiBps_at_optimum"] is None
    assert row["total_waste_at_interval"] is None
    text = _text(path)
    assert "without failures the waste is the checkpoint share alone" in text
    assert "at the optimum" not in text and "keeps checkpoints at 5.0%" in text
