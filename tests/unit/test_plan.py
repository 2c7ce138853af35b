"""`studyctl plan`: the JSON contract, sizes that agree with the layout, budgets."""

from __future__ import annotations

import json
from pathlib import Path

from studyctl.definition.checkpoint.layout import Parallelism, disk_steps_needed, summarize
from studyctl.definition.inputs.catalog import lookup
from studyctl.units import GIB
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
ceilings: off
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
    assert "points:" in proc.stdout and "node-hours" in proc.stdout and "mem/host" in proc.stdout
    assert "DLIO" in proc.stdout and "fadvise" in proc.stdout  # cold-read method per row
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


def _rows(tmp_path: Path, text: str) -> list[dict]:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(text)
    proc = run_cli("plan", str(sweep), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_plan_counts_full_restore_reads_and_shows_how_it_restores(tmp_path: Path) -> None:
    """ZeRO 0 at DP 8 with restore: full: every replica reads replica 0's files, 8x what was written."""
    (full, rank) = _rows(tmp_path, """\
study: p
models: [gpt2-125m]
matrix: {zero_stage: 0, nodes: 1, ranks_per_node: 8, restore: [full, rank]}
checkpoint: {rank_shift: 1, block_mib: 8, cold_read: auto}
filesystems: {fs: {path: /tmp/fs}}
ceilings: off
""")
    assert full["read_bytes_per_restore"] == 8 * full["checkpoint_bytes"]
    assert rank["read_bytes_per_restore"] == rank["checkpoint_bytes"]
    assert (full["restore"], full["rank_shift"], full["block_mib"], full["cold_read"]) == ("full", 1, 8, "fadvise")
    assert full["parameters"] == 124_439_808 and full["fsync"] is True and full["naming"] == "dlio"


def test_dlio_memory_is_base_plus_state_once_or_twice() -> None:
    from studyctl.definition.planning.plan import DLIO_BASE_BYTES, dlio_memory_per_host

    assert dlio_memory_per_host(10 * GIB, 8, restores=True) == 8 * (DLIO_BASE_BYTES + 20 * GIB)
    assert dlio_memory_per_host(10 * GIB, 8, restores=False) == 8 * (DLIO_BASE_BYTES + 10 * GIB)
    assert round(DLIO_BASE_BYTES / GIB, 2) == 0.36


def test_subset_mode_plans_the_running_ranks_share(tmp_path: Path) -> None:
    (row,) = _rows(tmp_path, """\
study: p
models: [llama3-70b]
matrix: {zero_stage: 3, nodes: 1, ranks_per_node: 8, tensor_parallel: 8}
checkpoint: {subset_world_size: 64}
filesystems: {fs: {path: /tmp/fs}}
ceilings: off
""")
    whole = summarize(lookup("llama3-70b"), Parallelism(8, 1, 8, 3)).total_bytes
    assert row["data_parallel"] == 8 and row["checkpoint_bytes"] == whole // 8
    assert not row["excluded"] and row["subset_world_size"] == 64


def test_subset_mode_runs_fewer_ranks_than_one_model_replica(tmp_path: Path) -> None:
    """MLPerf's 405B subset: one host of 8 processes of a TP8 x PP32 x DP2 run is feasible, not 'not a multiple'."""
    (row,) = _rows(tmp_path, """study: p
models: [llama3-405b]
matrix: {zero_stage: 1, nodes: 1, ranks_per_node: 8, tensor_parallel: 8, pipeline_parallel: 32}
checkpoint: {subset_world_size: 512}
filesystems: {fs: {path: /tmp/fs}}
ceilings: off
""")
    assert not row["excluded"] and row["writer_ranks"] == 8 and row["data_parallel"] == 2
    from studyctl.definition.checkpoint.layout import rank_files

    files = [f for r in range(8) for f in rank_files(lookup("llama3-405b"), Parallelism(8, 32, 2, 1), r)]
    assert row["checkpoint_bytes"] == sum(f.nbytes for f in files)


def test_capacity_problems_name_the_need_and_what_is_there() -> None:
    from studyctl.definition.planning.plan import Capacity, PlanSummary, capacity_notes, capacity_problems

    summary = PlanSummary(runnable=1, max_disk_bytes_needed={"fs": 10 * GIB}, max_disk_bytes_required={"fs": 10 * GIB},
                          max_worker_memory_per_host=GIB,
                          max_worker_memory_per_point=4 * GIB)
    roomy = Capacity({"fs": 20 * GIB}, {"fs": "/x"}, 8 * GIB, "this machine", hosts_share_one_machine=True)
    assert capacity_problems(summary, roomy) == []
    tight = Capacity({"fs": 5 * GIB}, {"fs": "/x"}, 2 * GIB, "this machine", hosts_share_one_machine=True)
    disk, memory = capacity_problems(summary, tight)
    assert "fs needs 10.00 GiB" in disk and "5.00 GiB free at /x" in disk
    assert "4.00 GiB" in memory and "this machine has 2.00 GiB" in memory
    per_host = Capacity({"fs": None}, {}, 2 * GIB, "Slurm RealMemory")
    assert capacity_problems(summary, per_host) == []  # 1 GiB per host fits a 2 GiB node; unknown disk is no problem
    unknown = Capacity({"fs": None}, {"fs": "/x"}, None, "the smallest node of partition p (sinfo: no nodes)")
    notes = capacity_notes(summary, unknown)
    assert "free space on fs not checked" in notes[0] and "host memory not checked" in notes[1]


def test_plan_warns_when_the_disk_is_too_small(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"study: p\nmodels: [llama3-405b]\nmatrix: {{zero_stage: 1, nodes: 32, ranks_per_node: 8, "
                     f"tensor_parallel: 8, pipeline_parallel: 32}}\nfilesystems: {{fs: {{path: {tmp_path}/ckpt}}}}\n")
    proc = run_cli("plan", str(sweep))
    assert proc.returncode == 0 and "will not fit: disk: filesystem fs needs" in proc.stderr
    strict = run_cli("plan", str(sweep), "--strict")
    assert strict.returncode == 1 and "capacity problem" in strict.stderr
