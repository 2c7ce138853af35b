"""Does a rank that finished its checkpoint early slow the ranks still writing? (`python -m benchmarks spin`)

MPICH busy-polls inside blocking collectives. The worker closes every phase with a collective, so on a
machine with as many cores as ranks, a rank that is done spins on a core that the ranks still copying
into the page cache (buffered I/O) and the kernel's writeback threads need; O_DIRECT writes need little
CPU and do not care. Two ranks, under mpiexec: rank 0 writes `--gib` GiB buffered + fsync, rank 1 a
quarter of that, then waits for rank 0 either in a blocking MPI_Barrier (spin) or in an MPI_Ibarrier
polled with short sleeps (yield, what the worker does since). Measured per run: rank 0's write time and
rank 1's CPU time while it waited. Alternating spin/yield runs, medians.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.worker_vs_fio import MPIEXEC
from worker import io

GIB = 1 << 30
BLOCK = 16 << 20


def _rank(mode: str, directory: str, nbytes: int) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    buf = io.Buffer.allocate(64 << 20)
    buf.stamp(rank + int(time.time()))
    mine = nbytes if rank == 0 else nbytes // 4
    comm.Barrier()
    start = time.perf_counter()
    io.write_buffered(os.path.join(directory, f"r{rank}"), mine, buf, BLOCK)
    wrote = time.perf_counter() - start
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    waited = time.perf_counter()
    if mode == "spin":
        comm.Barrier()
    else:
        req = comm.Ibarrier()
        while not req.Test():
            time.sleep(0.0002)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    waited = time.perf_counter() - waited
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    rows = comm.gather((wrote, waited, cpu), root=0)
    if rank == 0:
        print(" ".join(f"{x:.4f}" for x in (rows[0][0], rows[1][1], rows[1][2])))
    buf.close()


def run(mode: str, directory: Path, nbytes: int) -> tuple[float, float, float]:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "benchmarks.collective_spin", mode,
                           str(directory), str(nbytes)], capture_output=True, text=True, check=True)
    shutil.rmtree(directory, ignore_errors=True)
    wrote, waited, cpu = (float(x) for x in proc.stdout.split())
    return wrote, waited, cpu


def main(repeat: int = 5, gib: float = 1.0) -> int:
    root = Path(tempfile.mkdtemp(prefix="studyctl-bench-", dir="/var/tmp"))
    nbytes = int(gib * GIB)
    runs: dict[str, list[tuple[float, float, float]]] = {"spin": [], "yield": []}
    try:
        for i in range(repeat):
            for mode in (("spin", "yield") if i % 2 == 0 else ("yield", "spin")):
                runs[mode].append(run(mode, root / "w", nbytes))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for mode, rows in runs.items():
        wrote = statistics.median(r[0] for r in rows)
        busy = statistics.median(r[2] / r[1] for r in rows if r[1] > 0)
        print(f"wait by {mode:<5}: rank 0 writes {gib:g} GiB buffered in {wrote:.3f} s median "
              f"({gib / wrote:.2f} GiB/s; runs {', '.join(f'{r[0]:.2f}' for r in rows)}); the waiting rank "
              f"used {busy:.0%} of a core while it waited", flush=True)
    spin = statistics.median(r[0] for r in runs["spin"])
    yld = statistics.median(r[0] for r in runs["yield"])
    print(f"rank 0's write time, spin / yield: {spin / yld:.3f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4:
        _rank(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
