"""Engines across real slurmd nodes: DCP's process group is started from the MPI world under srun, every rank saves
its real tensors through torch.distributed.checkpoint or torch.save (sync, async, tiered to each node's TmpFS) and
restores them (its own, the replicated weights broadcast from the other node, or every file), checked against what
was saved; a study varies engine, state convention and replicated writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from studyctl.definition.result.plausibility import implausible
from studyctl.definition.result.result_schema import Result
from tests.integration.test_engine_points import check
from tests.slurm.test_slurm import cli, diag, not_completed, wait_final
from tests.slurm.test_slurm_strategies import tmpfs_pattern

pytestmark = pytest.mark.slurm

COMMON = """\
training: {simulated_step: {compute_s: 0.05}, interval_min: 10, node_mtbf_h: 10000}
slurm: {partition: debug, time_limit_min: 5}
ceilings: off
calibration: {enabled: false}
"""


def run_study(tmp_path: Path, name: str, body: str, timeout: int) -> dict[str, Any]:
    """Submit a gpt2-125m study (`body`: its matrix, filesystems and checkpoint) to the cluster; its final status."""
    sweep = tmp_path / f"{name}.yaml"
    sweep.write_text(f"study: {name}\nmodels: [gpt2-125m]\n{body}{COMMON}")
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = wait_final(tmp_path, name, timeout=timeout)
    return data


def test_dcp_points_on_two_real_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDYCTL_VERIFY_RESTORES", "1")  # the job's environment: every restore compared
    (tmp_path / "fs").mkdir()
    data = run_study(tmp_path, "dcp", f"""\
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1, engine: dcp, strategy: [sync, async], restore: [rank, broadcast]}}
filesystems:
  shared: {{path: {tmp_path / 'fs'}}}
checkpoint: {{scale: 0.002, writes: 2, reads: 2, buffer_mib: 4, block_mib: 4}}
""", timeout=600)
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


# (engine, state, replicated_writer, strategy, restore): each engine with each state, each writer, async and
# tiered; restores of every mode
ROWS = [("torch_save", "torch", "spread", "async", "broadcast"),
        ("torch_save", "megatron", "dp0", "tiered", "full"),
        ("dcp", "megatron", "spread", "tiered", "rank"),
        ("dcp", "torch", "dp0", "async", "rank")]


def test_a_study_varying_engine_state_and_writer_on_two_real_nodes(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """torch_save and DCP (its process group across the two slurmd nodes) under both state conventions and both
    replicated writers, async and tiered (each node's TmpFS its tier, node n2 'replaced': its restore reads
    shared storage), every restore verified against what was saved."""
    monkeypatch.setenv("STUDYCTL_VERIFY_RESTORES", "1")
    tier = tmpfs_pattern()
    (tmp_path / "fs").mkdir()
    zipped = {key: [row[i] for row in ROWS]
              for i, key in enumerate(("engine", "state", "replicated_writer", "strategy", "restore"))}
    data = run_study(tmp_path, "engines", f"""\
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1}}
zip: [{json.dumps(zipped)}]
filesystems:
  shared: {{path: {tmp_path / 'fs'}}}
  nodetmp: {{path: "{tier}", kind: local}}
checkpoint: {{scale: 0.002, writes: 2, reads: 1, buffer_mib: 4, block_mib: 4, tier: nodetmp, tier_keep: 2,
              replaced_nodes: 1}}
""", timeout=900)
    tier_roots: set[Path] = set()
    try:
        assert data["counts"] == {"COMPLETED": len(ROWS)}, f"{not_completed(data)}{diag(tmp_path, 'engines')}"
        seen = set()
        for p in data["points"]:
            result = Result.model_validate_json(Path(p["result_path"]).read_text())
            check(result)
            opts, prov = result.point.checkpoint, result.provenance
            seen.add((opts.engine, opts.state, opts.replicated_writer, opts.strategy, opts.restore))
            assert len(prov.node_names) == 2 and not prov.simulated_nodes, "two real slurmd nodes"
            for node in prov.node_names:
                tier_roots.update(Path(tier.replace("{node}", node)).glob("engines.*"))
            assert result.strategy is not None
            (restore,) = [t for t in result.strategy.checkpoints if t.phase == "read"]
            if opts.strategy == "tiered":  # n1's rank restores from its own TmpFS, the replaced n2's from shared
                assert restore.tier_bytes > 0 and restore.shared_bytes > 0
            if opts.restore == "broadcast":
                assert restore.broadcast_bytes > 0, "replica 0's weights reach the other node by MPI_Bcast"
        assert seen == set(ROWS)
    finally:
        for root in tier_roots:
            shutil.rmtree(root, ignore_errors=True)
    assert not [f for f in (tmp_path / "fs").rglob("*") if f.is_file()], "the points' files are removed"
