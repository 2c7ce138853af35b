"""Recovery after a failure on the real local Slurm cluster: 4 ranks on 2 nodes write a checkpoint, and
a NEW job step in the same allocation (sized for the larger world) restores it onto 2 ranks and onto 8 ranks with
a TP change, each new rank reading only its byte ranges; the launch is on the clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.points import Point
from studyctl.definition.checkpoint.recovery import restart_layout
from studyctl.definition.checkpoint.reshard import rank_reads, reshard_split
from tests.slurm.test_slurm import cli, diag, not_completed, wait_final

pytestmark = pytest.mark.slurm


def expected_bytes(point: Point) -> list[int]:
    assert point.recovery is not None
    new = restart_layout(point.model, point.parallelism, point.recovery)
    out = []
    for rank in range(new.world_size):
        _, own, shared = reshard_split(point.model, point.parallelism, new, rank, point.checkpoint.scale)
        out.append(sum(r.length for r in rank_reads(own, shared, rank < new.model_parallel, "rank")))
    return out


def test_restarts_onto_2_and_8_ranks_as_new_job_steps(tmp_path: Path) -> None:
    (tmp_path / "fs").mkdir()
    sweep = tmp_path / "rec.yaml"
    sweep.write_text(f"""\
study: rec
models: [gpt2-125m]
matrix: {{nodes: 2, ranks_per_node: 2, zero_stage: 3, tensor_parallel: 2,
          recovery: [{{shrink_to: 2}}, {{grow_to: 8, tensor_parallel: 1}}]}}
filesystems:
  shared: {{path: {tmp_path / 'fs'}}}
checkpoint: {{scale: 0.002, writes: 1, reads: 1, buffer_mib: 4, block_mib: 1}}
training: {{simulated_step: {{compute_s: 0.05, allreduce_mib: 1}}, interval_min: 10, node_mtbf_h: 10000}}
slurm: {{partition: debug, time_limit_min: 3}}
ceilings: off
calibration: {{enabled: false}}
""")
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    data = wait_final(tmp_path, "rec")
    assert data["counts"] == {"COMPLETED": 2}, f"{not_completed(data)}{diag(tmp_path, 'rec')}"
    for p in data["points"]:
        result = json.loads(Path(p["result_path"]).read_text())
        point = Point.model_validate(result["point"])
        x = result["recovery"]
        assert x["launcher"] == "srun" and x["old_world_size"] == 4
        assert x["new_world_size"] == point.recovery.world_size  # type: ignore[union-attr]
        assert x["bytes_restored_per_rank"] == expected_bytes(point), "each new rank reads exactly its ranges"
        assert x["launch_s"] > 0 and x["ready_s"] >= 0.05
        assert x["time_to_first_step_s"] == pytest.approx(x["launch_s"] + x["setup_s"] + x["restore_s"] + x["ready_s"])
        assert not any(f.is_file() for f in (tmp_path / "fs").rglob("*")), "the restart removed the checkpoint"
    proc = cli(tmp_path, "collect", "rec")
    assert proc.returncode == 0, proc.stderr
    report = (tmp_path / "results" / "rec" / "report.md").read_text()
    assert "## Time to the first training step after a failure" in report
    training = (tmp_path / "results" / "rec" / "tables" / "training.csv").read_text()
    assert "measured launch of its own restart (recovery shrink_to 2)" in training
