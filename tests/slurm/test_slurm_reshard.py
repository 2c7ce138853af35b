"""Resharded restores on the local Slurm cluster's nodes: a checkpoint written by 4 ranks on 4 nodes (srun), read
by new srun worlds of 8 ranks on 4 nodes and of 2 ranks with a TP change; every rank's bytes (read, or received
by broadcast) equal the independent element-by-element map, and every chunk is the file's bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.layout import Parallelism
from studyctl.definition.checkpoint.reshard import restart_parallelism
from tests.integration.test_reshard_read import MODEL
from tests.integration.test_worker import make_task
from tests.unit import reshard_oracle as oracle

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]


def srun(nodes: int, ranks: int, *argv: str) -> None:
    proc = subprocess.run(["srun", "-N", str(nodes), "-n", str(ranks), "--mpi=pmi2", f"--chdir={REPO}",
                           sys.executable, *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize(("zero", "tp", "nodes", "world", "new_tp", "io_mode"),
                         [(1, 1, 4, 8, 1, "direct"), (3, 2, 2, 2, 1, "direct"), (1, 2, 4, 8, 1, "buffered")])
def test_new_srun_worlds_read_exactly_their_bytes(tmp_path: Path, zero: int, tp: int, nodes: int, world: int,
                                                  new_tp: int, io_mode: str) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=4, io_mode=io_mode, zero=zero, tp=tp, model=MODEL, scale=1.0, writes=1,
                     reads=0, keep=True, restore="broadcast", block_mib=1, buffer_mib=1)
    srun(4, 4, "-m", "worker", str(task))
    (step,) = list(fs.rglob("global_epoch1_step1"))
    out = tmp_path / "reshard.json"
    srun(nodes, world, "-m", "tests.integration.reshard_mpi", str(task), str(step), str(out), str(new_tp), "1")
    records = json.loads(out.read_text())
    old = Parallelism(tp, 1, 4 // tp, zero)
    new = restart_parallelism(old, world, new_tp, 1)
    expected = [sum(len(b) for b in oracle.needs(MODEL, old, new, k).values()) for k in range(world)]
    assert [r["bytes_read"] + r["received_bytes"] for r in records] == expected
    assert all(r["wrong_chunks"] == 0 and r["error"] is None for r in records)
    assert sum(r["received_bytes"] for r in records) > 0 or zero == 3
