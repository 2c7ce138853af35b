"""Checkpoint strategies on the real local Slurm cluster: each fake node's own TmpFS is its local tier, and
broadcast restores cross real slurmd nodes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from studyctl.definition.inputs.filesystems import must_exist
from studyctl.host import mount_of
from tests.slurm.test_slurm import cli, diag, not_completed, wait_final

pytestmark = pytest.mark.slurm


def tmpfs_pattern() -> str:
    """slurm.conf's TmpFS, e.g. /tmp/slurm-local/tmp/%n, as a tier path: %n becomes {node}."""
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    line = next((ln for ln in out.splitlines() if ln.split("=")[0].strip() == "TmpFS"), "")
    value = line.partition("=")[2].strip()
    if "%n" not in value:
        pytest.fail(f"the local cluster's TmpFS is not per node ({value!r}): run scripts/slurm-local-cluster.sh up")
    return value.replace("%n", "{node}")


def test_strategies_and_broadcast_on_real_nodes(tmp_path: Path) -> None:
    tier = tmpfs_pattern()
    (tmp_path / "fs").mkdir()
    sweep = tmp_path / "strat.yaml"
    sweep.write_text(f"""\
study: strat
models: [gpt2-125m]
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1, strategy: [sync, async, tiered], restore: broadcast}}
filesystems:
  shared: {{path: {tmp_path / 'fs'}}}
  nodetmp: {{path: "{tier}", kind: local}}
checkpoint: {{scale: 0.002, writes: 2, reads: 1, buffer_mib: 4, block_mib: 4, tier: nodetmp, tier_keep: 2,
              replaced_nodes: 1, keep: true}}
training: {{simulated_step: {{compute_s: 0.05}}, interval_min: 10, node_mtbf_h: 10000}}
slurm: {{partition: debug, time_limit_min: 3}}
ceilings: off
calibration: {{enabled: false}}
""")
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    data = wait_final(tmp_path, "strat")
    assert data["counts"] == {"COMPLETED": 3}, f"{not_completed(data)}{diag(tmp_path, 'strat')}"
    tier_roots = set()
    try:
        for p in data["points"]:
            result = json.loads(Path(p["result_path"]).read_text())
            info, prov = result["strategy"], result["provenance"]
            assert len(prov["node_names"]) == 2 and not prov["simulated_nodes"], "two real slurmd nodes"
            writes = [s for s in info["checkpoints"] if s["phase"] == "write"]
            (restore,) = [s for s in info["checkpoints"] if s["phase"] == "read"]
            spans = {c["index"]: c["span_s"] for c in result["checkpoints"] if c["phase"] == "write"}
            assert all(0 < s["blocking_s"] <= spans[s["index"]] for s in writes)
            weights = result["sizes"]["read_bytes_per_restore"] - result["sizes"]["written_checkpoint_bytes"]
            assert restore["broadcast_bytes"] == weights > 0, "replica 0's weights reach the other node by MPI_Bcast"
            if info["strategy"] == "sync":
                continue
            assert all(s["background_bytes"] == result["sizes"]["written_checkpoint_bytes"] for s in writes)
            if info["strategy"] == "tiered":
                # node n2 was 'replaced': its rank restores from shared storage, n1's rank from its TmpFS
                assert restore["tier_bytes"] > 0 and restore["shared_bytes"] > 0
                assert info["tier_fstype"] == mount_of(must_exist(tier))["fstype"], "the tier's mount, recorded"
                for node in prov["node_names"]:
                    root = Path(tier.replace("{node}", node))
                    kept = list(root.glob(f"strat.*/{result['point_id']}/{node}/*/*"))
                    if node == prov["node_names"][0]:  # the last node was the replaced one
                        assert kept, f"checkpoint files on {node}'s own TmpFS"
                    tier_roots.update(root.glob("strat.*"))
    finally:
        for root in tier_roots:
            shutil.rmtree(root, ignore_errors=True)
    proc = cli(tmp_path, "collect", "strat")
    assert proc.returncode == 0, proc.stderr
    plots = tmp_path / "results" / "strat" / "plots"
    assert (plots / "overhead_gpt2-125m.png").exists() and (plots / "restore_time.png").exists()
