"""DCP across real slurmd nodes: the process group is started from the MPI world under srun, every rank saves its
real tensors through torch.distributed.checkpoint (sync and async) and restores them (its own, and the replicated
weights broadcast from the other node), checked against what was saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studyctl.definition.plausibility import implausible
from studyctl.definition.result_schema import Result
from tests.slurm.test_slurm import cli, diag, not_completed, wait_final

pytestmark = pytest.mark.slurm


def test_dcp_points_on_two_real_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDYCTL_VERIFY_RESTORES", "1")  # the job's environment: every restore compared
    (tmp_path / "fs").mkdir()
    sweep = tmp_path / "dcp.yaml"
    sweep.write_text(f"""\
study: dcp
models: [gpt2-125m]
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1, engine: dcp, strategy: [sync, async], restore: [rank, broadcast]}}
filesystems:
  shared: {{path: {tmp_path / 'fs'}}}
checkpoint: {{scale: 0.002, writes: 2, reads: 2, buffer_mib: 4, block_mib: 4}}
training: {{simulated_step: {{compute_s: 0.05}}, interval_min: 10, node_mtbf_h: 10000}}
slurm: {{partition: debug, time_limit_min: 5}}
ceilings: off
calibration: {{enabled: false}}
""")
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    data = wait_final(tmp_path, "dcp", timeout=600)
    assert data["counts"] == {"COMPLETED": 4}, f"{not_completed(data)}{diag(tmp_path, 'dcp')}"
    for p in data["points"]:
        result = Result.model_validate_json(Path(p["result_path"]).read_text())
        assert implausible(result) is None
        assert len(result.provenance.node_names) == 2 and not result.provenance.simulated_nodes
        engine = result.engine
        assert engine is not None and engine.engine == "dcp"
        reads = [t for t in engine.checkpoints if t.phase == "read"]
        assert len(reads) == 2 and all(t.verified is True for t in reads)
        writes = [t for t in engine.checkpoints if t.phase == "write"]
        assert all(t.files == 3 for t in writes), "a .distcp file per rank and rank 0's .metadata"
        if result.point.checkpoint.strategy == "async":
            assert all(t.blocked_s is not None and t.persist_s is not None and t.blocked_s <= t.persist_s
                       for t in writes)
        if result.point.checkpoint.restore == "broadcast":
            assert result.strategy is not None
            assert all(t.broadcast_bytes > 0 for t in result.strategy.checkpoints if t.phase == "read")
    assert not [f for f in (tmp_path / "fs").rglob("*") if f.is_file()], "the points' files are removed"
    assert json.loads(cli(tmp_path, "sweep", "status", "dcp", "--json").stdout)["counts"] == {"COMPLETED": 4}
