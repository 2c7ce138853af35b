"""`studyctl plan`: the JSON contract, sizes that agree with the layout, budgets."""

from __future__ import annotations

import json
from pathlib import Path

from studyctl.spec.catalog import lookup
from studyctl.spec.layout import Parallelism, summarize
from studyctl.spec.plan import disk_steps_needed
from tests.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
CONTRACT = ["point_id", "model", "zero_stage", "tensor_parallel", "pipeline_parallel", "data_parallel", "nodes",
            "ranks_per_node", "world_size", "filesystem", "io_mode", "repetition", "checkpoint_bytes",
            "bytes_per_rank_max", "bytes_per_rank_min", "files_per_checkpoint", "writer_ranks", "excluded",
            "exclude_reason"]


def test_plan_json_contract_and_sizes(tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text("""\
study: p
models: [llama3-70b]
matrix: {zero_stage: [1, 3], nodes: [8], ranks_per_node: 8, tensor_parallel: 8, pipeline_parallel: [1, 4]}
filesystems: {fs: {path: /tmp/fs}}
""")
    proc = run_cli("plan", str(sweep), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) == 4
    for row in rows:
        assert all(key in row for key in CONTRACT)
    by = {(r["zero_stage"], r["pipeline_parallel"]): r for r in rows}
    z3pp4 = by[(3, 4)]
    assert z3pp4["excluded"] and "ZeRO-3" in z3pp4["exclude_reason"]
    z1pp4 = by[(1, 4)]
    expected = summarize(lookup("llama3-70b"), Parallelism(8, 4, 2, 1))
    assert z1pp4["checkpoint_bytes"] == expected.total_bytes
    assert z1pp4["files_per_checkpoint"] == 728
    assert z1pp4["world_size"] == 64 and z1pp4["data_parallel"] == 2
    assert z1pp4["writer_ranks"] == 64
    z3pp1 = by[(3, 1)]
    assert z3pp1["bytes_per_rank_max"] == z3pp1["bytes_per_rank_min"]


def test_plan_human_table_and_budget(tmp_path: Path) -> None:
    proc = run_cli("plan", str(REPO / "sweeps" / "quickstart.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert "points:" in proc.stdout and "node-hours" in proc.stdout and "mem/host DLIO" in proc.stdout
    over = run_cli("plan", str(REPO / "sweeps" / "quickstart.yaml"), "--budget-node-hours", "0.0001")
    assert over.returncode == 1
    assert "exceeds --budget-node-hours" in over.stderr and "Traceback" not in over.stderr


def test_submit_refuses_over_budget_and_creates_nothing(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = run_cli("sweep", "submit", str(REPO / "sweeps" / "quickstart.yaml"), "--results", str(results),
                   "--budget-node-hours", "0.0001")
    assert proc.returncode == 1
    assert "nothing was submitted" in proc.stderr
    assert not results.exists()


def test_disk_steps_needed() -> None:
    assert disk_steps_needed(10, 10) == 10
    assert disk_steps_needed(10, 3) == 4
    assert disk_steps_needed(3, 0) == 1
    assert disk_steps_needed(0, 5) == 0
