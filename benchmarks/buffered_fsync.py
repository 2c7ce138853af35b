"""Why a 2-rank buffered checkpoint write can measure below fio on the same bytes: the file pattern.

fio writes one file per job and fsyncs it once at the end. The worker writes a ZeRO-3 rank's two files
(model shard, then the 6× larger optimizer shard) and fsyncs each right after writing it, like a
framework saving file by file. Each pattern here is run by 2 processes on the same bytes with the
worker's own write primitive (`worker.io.write_buffered`, or the same loop with the fsync moved), and
fio runs before and after, in one run:
  one-file       one file per process, one fsync (fio's pattern)
  two-files      model + optimizer files, fsync after each (the worker's pattern)
  two-files-end  the same two files, both fsynced after both were written
Ratio = pattern / mean(fio before, fio after). `python -m benchmarks buffered [repeat]`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.worker_vs_fio import fio
from worker import io

GIB = 1 << 30
BLOCK = 16 << 20
MODEL_SHARE = 1 / 7  # ZeRO-3: 2 B of weights per 12 B of optimizer state


def _write(path: str, nbytes: int, buf: io.Buffer, fsync: bool) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off, boff, length in io._chunks(nbytes, BLOCK, buf.size):
            buf.mark(boff, length)
            io._pwrite_all(fd, buf.view[boff:boff + length], off)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return nbytes


def _rank(pattern: str, directory: str, rank: int, nbytes: int, barrier, out) -> None:
    buf = io.Buffer.allocate(64 << 20)
    buf.stamp(rank + int(time.time()))
    sizes = [nbytes] if pattern == "one-file" else [int(nbytes * MODEL_SHARE), nbytes - int(nbytes * MODEL_SHARE)]
    paths = [os.path.join(directory, f"r{rank}-f{i}") for i in range(len(sizes))]
    barrier.wait()
    start = time.time()
    for path, size in zip(paths, sizes, strict=True):
        _write(path, size, buf, fsync=pattern != "two-files-end")
    if pattern == "two-files-end":
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
    out.put((start, time.time()))
    buf.close()


def run_pattern(pattern: str, directory: Path, ranks: int, nbytes: int) -> float:
    """Aggregate bytes/s: all ranks' bytes over (last end − first start)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(ranks), ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(pattern, str(directory), r, nbytes, barrier, out)) for r in range(ranks)]
    for p in procs:
        p.start()
    stamps = [out.get() for _ in procs]
    for p in procs:
        p.join()
    shutil.rmtree(directory, ignore_errors=True)
    return ranks * nbytes / (max(e for _, e in stamps) - min(s for s, _ in stamps))


def main(repeat: int = 5, ranks: int = 2, gib_per_rank: float = 1.0, base: Path | None = None) -> int:
    """Rounds of fio, each pattern, fio; every pattern's ratio to fio (rounds whose two fio figures agree within
    15%) and to one-file in the same round (every round: the pattern comparison needs no steady disk)."""
    if not shutil.which("fio"):
        print("fio is not installed (apt-get install fio)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="studyctl-bench-", dir=base or "/var/tmp"))
    nbytes = int(gib_per_rank * GIB)
    patterns = ("one-file", "two-files", "two-files-end")
    rounds: list[dict[str, float]] = []
    try:
        for i in range(repeat):
            (root / "fio").mkdir(exist_ok=True)
            row = {"fio_before": fio(root / "fio", "write", ranks, nbytes, BLOCK, False)}
            shutil.rmtree(root / "fio", ignore_errors=True)
            for pattern in patterns[i % 3:] + patterns[:i % 3]:  # rotated: no pattern always runs first
                row[pattern] = run_pattern(pattern, root / "mine", ranks, nbytes)
            (root / "fio").mkdir(exist_ok=True)
            row["fio_after"] = fio(root / "fio", "write", ranks, nbytes, BLOCK, False)
            shutil.rmtree(root / "fio", ignore_errors=True)
            rounds.append(row)
            print("  round: " + ", ".join(f"{k} {v / GIB:.2f}" for k, v in row.items()) + " GiB/s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for pattern in patterns:
        to_one = [r[pattern] / r["one-file"] for r in rounds]
        steady = [r for r in rounds if abs(r["fio_before"] - r["fio_after"]) * 2 / (r["fio_before"] + r["fio_after"])
                  <= 0.15]
        to_fio = [r[pattern] * 2 / (r["fio_before"] + r["fio_after"]) for r in steady]
        fio_text = (f"{statistics.median(to_fio):.3f} of fio (n={len(to_fio)})" if to_fio
                    else "no round with a steady fio")
        print(f"buffered {pattern:<14} ranks={ranks}: median {statistics.median(to_one):.3f} of one-file "
              f"(min {min(to_one):.3f}, max {max(to_one):.3f}, n={len(to_one)}); {fio_text}; "
              f"{statistics.median(r[pattern] for r in rounds) / GIB:.2f} GiB/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
