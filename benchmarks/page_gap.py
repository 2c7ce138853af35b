"""Why the worker's buffered write measured 0.5-0.7x fio on this VM: the idle gap before the write, not its CPU.

This VM hands memory that stayed free for ~2 s back to its host (virtio-balloon free page reporting); a
buffered write whose page-cache pages come from such memory spends its time in the kernel's copy into the
page cache while the host backs them again. The benchmark frees 2 GiB of page cache (a fio write, deleted),
waits `gap` seconds, then writes 1 GiB per process buffered + fsync with fio and with the worker's own
primitive (`worker.io.write_buffered`, two processes, the worker's 16 MiB block), and prints GiB/s and the
CPU each used (user, system): with no gap both run at the disk's rate; after 3 s both fall together.
`python -m benchmarks.page_gap [repeat]`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from multiprocessing import Barrier, Process, Queue
from pathlib import Path
from typing import Any

from worker import io

GIB = 1 << 30
MIB = 1 << 20
RANKS = 2
BLOCK = 16 * MIB


def fio_write(directory: Path) -> tuple[float, float, float]:
    """(GiB/s, user s, system s) of fio writing 1 GiB per job, buffered, end_fsync."""
    cmd = ["fio", "--name=gap", f"--directory={directory}", "--rw=write", f"--bs={BLOCK}", f"--size={GIB}",
           f"--numjobs={RANKS}", "--ioengine=psync", "--group_reporting", "--output-format=json", "--end_fsync=1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    runtime_s = job["write"]["runtime"] / 1000
    return (job["write"]["bw_bytes"] / GIB, job["usr_cpu"] / 100 * runtime_s * RANKS,
            job["sys_cpu"] / 100 * runtime_s * RANKS)


def _rank(directory: Path, rank: int, start: Any, results: Any) -> None:
    buf = io.Buffer.allocate(BLOCK)
    buf.stamp(rank)
    start.wait()
    began, cpu = time.perf_counter(), os.times()
    io.write_buffered(str(directory / f"r{rank}"), GIB, buf, BLOCK)
    done = os.times()
    results.put((time.perf_counter() - began, done.user - cpu.user, done.system - cpu.system))
    buf.close()


def primitive_write(directory: Path) -> tuple[float, float, float]:
    """(GiB/s, user s, system s) of the worker's write primitive in RANKS processes started together."""
    start, results = Barrier(RANKS), Queue()
    procs = [Process(target=_rank, args=(directory, r, start, results)) for r in range(RANKS)]
    for p in procs:
        p.start()
    got = [results.get() for _ in procs]
    for p in procs:
        p.join()
    return RANKS * GIB / max(g[0] for g in got) / GIB, sum(g[1] for g in got), sum(g[2] for g in got)


def after_gap(directory: Path, gap_s: float, write: Any) -> tuple[float, float, float]:
    """Free 2 GiB of page cache (written, deleted), wait `gap_s`, then `write`."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    fio_write(directory)
    shutil.rmtree(directory)
    directory.mkdir()
    time.sleep(gap_s)
    try:
        return write(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(repeat: int = 3) -> int:
    if not shutil.which("fio"):
        print("fio is not installed (apt-get install fio)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="studyctl-gap-", dir="/var/tmp"))
    try:
        for _ in range(repeat):
            for gap in (0.0, 3.0):
                for name, write in (("fio", fio_write), ("worker primitive", primitive_write)):
                    rate, user, system = after_gap(root / "d", gap, write)
                    print(f"gap {gap:.0f} s  {name:<17} {rate:.2f} GiB/s  cpu user {user:.2f} s  system {system:.2f} s",
                          flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
