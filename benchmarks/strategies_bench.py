"""Checkpoint strategies against the primitives they are built on, side by side in one run:

  async blocking   the worker's snapshot copy (per-rank GiB/s over its blocking time) vs a plain memcpy of the
                   same bytes per rank, as many ranks at once (target >= 0.95x)
  tier drain       the worker's drain to shared storage (all bytes over the slowest rank's drain) vs fio writing
                   the same bytes per rank with one job per rank (target >= 0.9x)
The worker's simulated training is the sweep's default step (`training.simulated_step`: accelerator compute, its
host dispatch then the device wait, then a gradient all-reduce), with a 50 ms compute.
  broadcast        the worker's broadcast restore (the reading rank's time in MPI_Bcast) vs one plain MPI_Bcast
                   of the same bytes (ratio = plain time / worker time)
Each reference runs right before and right after the worker; ratio = worker / mean of the two.
`python -m benchmarks strategies [repeat]`.
"""

from __future__ import annotations

import json
import mmap
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.worker_vs_fio import MPIEXEC, fio
from studyctl.definition.checkpoint.layout import rank_files, summarize
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.training import SimulatedStep
from studyctl.units import GIB, MIB

BLOCK_MIB = 16


def _point(ranks: int, gib_per_rank: float, zero: int, io_mode: str = "buffered", **opts: object) -> Point:
    model = lookup("gpt2-1.5b")
    probe = Point(model=model, zero_stage=zero, nodes=1, ranks_per_node=ranks, filesystem="bench")
    scale = min(1.0, gib_per_rank * GIB * ranks / summarize(model, probe.parallelism).total_bytes)
    options = {"writes": 3, "reads": 0, "scale": scale, "buffer_mib": 64, "block_mib": BLOCK_MIB, **opts}
    checkpoint = CheckpointOptions(**options).for_strategy(SimulatedStep(compute_s=0.05))  # as a sweep expands it
    return Point(model=model, zero_stage=zero, nodes=1, ranks_per_node=ranks, filesystem="bench", io_mode=io_mode,
                 checkpoint=checkpoint)


def run_worker(root: Path, point: Point, tier: Path | None = None) -> dict:
    for d in ("data", "out"):
        (root / d).mkdir(parents=True, exist_ok=True)
    task = WorkerTask(study="bench", point_id=point.point_id, point=point, filesystem_path=str(root / "data"),
                      result_path=str(root / "out" / "result.json"), error_path=str(root / "out" / "error.json"),
                      tier_path=str(tier) if tier else None)
    path = root / "task.json"
    path.write_text(task.model_dump_json())
    proc = subprocess.run([MPIEXEC, "-n", str(point.world_size), sys.executable, "-m", "worker", str(path)],
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads((root / "out" / "result.json").read_text())


def mpi_reference(kind: str, ranks: int, nbytes: int) -> float:
    """Seconds of the slowest rank: a plain memcpy of `nbytes` per rank, or one MPI_Bcast of `nbytes`."""
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "benchmarks.strategies_bench", kind,
                           str(nbytes)], capture_output=True, text=True, check=True)
    return float(proc.stdout.strip().splitlines()[-1])


def _reference_rank(kind: str, nbytes: int) -> None:
    """Under mpiexec: time the primitive between barriers; rank 0 prints the slowest rank's seconds."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if kind == "memcpy":  # one copy of the rank's bytes into resident memory, as a plain memcpy
        src = mmap.mmap(-1, nbytes)
        src.write(bytes(nbytes))
        dst = mmap.mmap(-1, nbytes)
        sview, dview = memoryview(src), memoryview(dst)
        dview[::4096] = bytes(len(dview[::4096]))  # resident before the clock, as the worker's snapshot
        comm.Barrier()
        start = MPI.Wtime()
        dview[:] = sview
        seconds = MPI.Wtime() - start
    else:
        data = bytearray(nbytes)
        comm.Barrier()
        start = MPI.Wtime()
        comm.Bcast([data, MPI.BYTE], root=0)
        seconds = MPI.Wtime() - start
    slowest = comm.reduce(seconds, op=MPI.MAX, root=0)
    if comm.Get_rank() == 0:
        print(slowest)


def _median_ratio(pairs: list[tuple[float, float]]) -> tuple[float, float, float, int]:
    ratios = [w / r for w, r in pairs]
    return statistics.median(ratios), min(ratios), max(ratios), len(ratios)


def async_blocking(root: Path, ranks: int, gib_per_rank: float, repeat: int) -> list[tuple[float, float]]:
    """(worker per-rank GiB/s, memcpy per-rank GiB/s) per run and checkpoint."""
    point = _point(ranks, gib_per_rank, 3, strategy="async")
    nbytes = summarize(point.model, point.parallelism, point.checkpoint.scale).bytes_per_rank_max
    out = []
    for _ in range(repeat):
        before = mpi_reference("memcpy", ranks, nbytes)
        result = run_worker(root / "async", point)
        after = mpi_reference("memcpy", ranks, nbytes)
        ref = nbytes / ((before + after) / 2) / GIB
        for s in result["strategy"]["checkpoints"]:
            out.append((nbytes / s["blocking_s"] / GIB, ref))
        shutil.rmtree(root / "async", ignore_errors=True)
    return out


def drain(root: Path, ranks: int, gib_per_rank: float, repeat: int, mode: str) -> list[tuple[float, float]]:
    """(worker drain GiB/s, fio GiB/s) per run and checkpoint; the tier is /dev/shm."""
    point = _point(ranks, gib_per_rank, 3, mode, strategy="tiered", tier="shm")
    per_rank = summarize(point.model, point.parallelism, point.checkpoint.scale).bytes_per_rank_max
    tier = Path(tempfile.mkdtemp(prefix="studyctl-bench-tier-", dir="/dev/shm"))
    out = []
    try:
        for _ in range(repeat):
            (root / "fio").mkdir(parents=True, exist_ok=True)
            before = fio(root / "fio", "write", ranks, per_rank, BLOCK_MIB * MIB, mode == "direct")
            shutil.rmtree(root / "fio", ignore_errors=True)
            result = run_worker(root / "tiered", point, tier)
            (root / "fio").mkdir(parents=True, exist_ok=True)
            after = fio(root / "fio", "write", ranks, per_rank, BLOCK_MIB * MIB, mode == "direct")
            shutil.rmtree(root / "fio", ignore_errors=True)
            if abs(before - after) / ((before + after) / 2) > 0.15:
                continue
            for s in result["strategy"]["checkpoints"]:
                out.append((s["background_GiBps"], (before + after) / 2 / GIB))
            shutil.rmtree(root / "tiered", ignore_errors=True)
    finally:
        shutil.rmtree(tier, ignore_errors=True)
    return out


def broadcast(root: Path, ranks: int, gib_per_rank: float, repeat: int) -> list[tuple[float, float]]:
    """(plain MPI_Bcast s, worker broadcast s) per restore, for ZeRO-1 weights broadcast to every replica."""
    point = _point(ranks, gib_per_rank, 1, writes=1, reads=3, restore="broadcast")
    weights = sum(f.nbytes for f in rank_files(point.model, point.parallelism, 0, point.checkpoint.scale)
                  if f.kind == "model")
    out = []
    for _ in range(repeat):
        before = mpi_reference("bcast", ranks, weights)
        result = run_worker(root / "bcast", point)
        after = mpi_reference("bcast", ranks, weights)
        for s in result["strategy"]["checkpoints"]:
            if s["phase"] == "read":
                out.append(((before + after) / 2, s["broadcast_s"]))
        shutil.rmtree(root / "bcast", ignore_errors=True)
    return out


def main(repeat: int = 5, ranks: int = 2, gib_per_rank: float = 0.5) -> int:
    """Drains run with 1 rank too: each rank's drain competes with its training's all-reduces (fio runs alone)."""
    root = Path(tempfile.mkdtemp(prefix="studyctl-bench-", dir="/var/tmp"))
    rows = []
    try:
        rows.append((f"async blocking vs memcpy, {ranks} ranks", async_blocking(root, ranks, gib_per_rank, repeat),
                     "worker {0:.2f} GiB/s per rank, memcpy {1:.2f}"))
        if shutil.which("fio"):
            for mode in ("buffered", "direct"):
                for n in sorted({1, ranks}):
                    rows.append((f"tier drain vs fio ({mode}), {n} rank(s)",
                                 drain(root, n, gib_per_rank, repeat, mode), "worker drain {0:.2f} GiB/s, fio {1:.2f}"))
        rows.append((f"broadcast vs plain MPI_Bcast (plain time / worker time), {ranks} ranks",
                     broadcast(root, ranks, gib_per_rank, repeat), "plain {0:.3f} s, worker {1:.3f} s"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for name, pairs, medians in rows:
        if not pairs:
            print(f"{name}: no valid run (the reference varied > 15%)")
            continue
        med, lo, hi, n = _median_ratio(pairs)
        detail = medians.format(statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs))
        print(f"{name}: median {med:.3f} (min {lo:.3f}, max {hi:.3f}, n={n}; {detail})", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] in ("memcpy", "bcast"):
        _reference_rank(sys.argv[1], int(sys.argv[2]))
    else:
        sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
