"""Resharded restores for real: the worker writes a checkpoint with 4 ranks, then a plain mpiexec world of the
new size reads it with worker.reshard_read; each rank's bytes must be the independent oracle's map."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.layout import Parallelism, rank_files
from studyctl.definition.checkpoint.reshard import reshard_reads, restart_parallelism
from studyctl.definition.inputs.catalog import ModelSpec
from studyctl.definition.result.result_schema import Result
from tests.integration.test_worker import MPIEXEC, make_task, run_worker
from tests.unit import reshard_oracle as oracle
from worker.io import ALIGN

HERE = Path(__file__).resolve().parent
# Small enough for the element-by-element oracle, with tensors of odd byte sizes (ranges off the 4 KiB grid).
MODEL = ModelSpec("reshard-small", num_layers=4, hidden_size=40, ffn_hidden_size=72, num_attention_heads=4,
                  num_kv_heads=2, vocab_size=130)


def _written(tmp_path: Path, zero: int, tp: int, pp: int, io_mode: str, restore: str,
             scale: float = 1.0) -> tuple[Path, Path]:
    """(task, step directory) of a 4-rank checkpoint written by the worker and kept."""
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=4, io_mode=io_mode, zero=zero, tp=tp, pp=pp, model=MODEL, scale=scale,
                     writes=1, reads=0, keep=True, restore=restore, block_mib=1, buffer_mib=1)
    proc = run_worker(task, 4)
    assert proc.returncode == 0, proc.stderr
    Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    (step,) = list(fs.rglob("global_epoch1_step1"))
    return task, step


def _restore(tmp_path: Path, task: Path, step: Path, world: int, tp: int, pp: int) -> list[dict]:
    out = tmp_path / "reshard.json"
    proc = subprocess.run([MPIEXEC, "-n", str(world), sys.executable, "-m", "tests.integration.reshard_mpi",
                           str(task), str(step), str(out), str(tp), str(pp)], capture_output=True, text=True,
                          timeout=300, cwd=HERE.parents[1])  # as a module: this checkout's studyctl, not the venv's
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def _cover(ranges: list[dict], sizes: dict[str, int]) -> int:
    """Bytes O_DIRECT moves for these ranges: the 4 KiB blocks they touch, each once, cut at the file's end."""
    blocks = {(r["name"], b) for r in ranges for b in range(r["offset"] // ALIGN, -(-(r["offset"] + r["length"])
                                                                                   // ALIGN))}
    return sum(min(ALIGN, sizes[name] - b * ALIGN) for name, b in blocks)


# (ZeRO, old TP, PP; new world, TP, PP, I/O mode, scale)
CASES = [
    (1, 1, 1, 2, 1, 1, "buffered", 1.0),  # 4 → 2
    (3, 1, 1, 8, 1, 1, "direct", 1.0),  # 4 → 8
    (1, 2, 1, 4, 1, 1, "direct", 1.0),  # TP 2 → 1
    (2, 1, 2, 2, 1, 1, "buffered", 1.0),  # PP 2 → 1 on 2 ranks (per-layer files)
    (0, 1, 1, 8, 2, 1, "hybrid", 1.0),  # ZeRO 0, 4 → 8 with TP 2
    (3, 2, 1, 8, 1, 1, "direct", 0.3),  # scaled tensors: TP 2 → 1, 4 → 8
]


@pytest.mark.parametrize(("zero", "tp", "pp", "world", "new_tp", "new_pp", "io_mode", "scale"), CASES)
def test_each_new_rank_reads_exactly_its_bytes(tmp_path: Path, zero: int, tp: int, pp: int, world: int,
                                               new_tp: int, new_pp: int, io_mode: str, scale: float) -> None:
    task, step = _written(tmp_path, zero, tp, pp, io_mode, "full", scale)
    records = _restore(tmp_path, task, step, world, new_tp, new_pp)
    old = Parallelism(tp, pp, 4 // (tp * pp), zero)
    new = restart_parallelism(old, world, new_tp, new_pp)
    sizes = {p.name: p.stat().st_size for p in step.iterdir()}
    assert len(records) == world
    for rank, rec in enumerate(records):
        expected = oracle.needs(MODEL, old, new, rank, scale)
        assert rec["bytes_read"] == sum(len(b) for b in expected.values()), rank
        assert {r["name"]: 0 for r in rec["ranges"]}.keys() == expected.keys()
        assert [tuple(r.values()) for r in rec["ranges"]] == [
            (r.name, r.kind, r.offset, r.length) for r in reshard_reads(MODEL, old, new, rank, scale)]
        assert rec["files_opened"] == len(expected)
        transfer = _cover(rec["ranges"], sizes) if rec["direct"] else rec["bytes_read"]
        assert rec["transferred_bytes"] == transfer
        assert rec["delivered_bytes"] == rec["bytes_read"] and rec["wrong_chunks"] == 0
    assert records[0]["direct"] == (io_mode != "buffered")


def test_broadcast_reads_shared_bytes_once_per_group(tmp_path: Path) -> None:
    """ZeRO 1, 4 ranks of TP 1 → 8 ranks of TP 2: two groups of 4 replicas; the lowest rank of each reads the
    weights and broadcasts them, the others read their optimizer piece only, and every chunk arrives intact."""
    task, step = _written(tmp_path, 1, 1, 1, "direct", "broadcast")
    records = _restore(tmp_path, task, step, 8, 2, 1)
    old = Parallelism(1, 1, 4, 1)
    new = restart_parallelism(old, 8, 2, 1)
    kinds = {f.name: f.kind for r in range(4) for f in rank_files(MODEL, old, r)}
    for rank, rec in enumerate(records):
        expected = oracle.needs(MODEL, old, new, rank)
        weights = sum(len(b) for name, b in expected.items() if kinds[name] == "model")
        total = sum(len(b) for b in expected.values())
        root = rank < new.model_parallel
        assert rec["bytes_read"] == (total if root else total - weights), rank
        assert rec["received_bytes"] == (0 if root else weights), rank
        assert all(r["kind"] == "optimizer" for r in rec["ranges"]) or root
        assert rec["delivered_bytes"] == total and rec["wrong_chunks"] == 0


def test_a_reader_that_fails_still_sends_every_chunk(tmp_path: Path) -> None:
    """The weights file is gone: the group's reader fails, its replicas still get the whole chunk sequence (no
    rank hangs) and only the reader reports the error."""
    task, step = _written(tmp_path, 1, 1, 1, "buffered", "broadcast")
    (step / "model_0_model_states.pt").unlink()
    records = _restore(tmp_path, task, step, 2, 1, 1)
    weights = next(f.nbytes for f in rank_files(MODEL, Parallelism(1, 1, 4, 1), 0) if f.kind == "model")
    assert "model_0_model_states.pt" in records[0]["error"] and records[1]["error"] is None
    assert records[1]["received_bytes"] == weights
