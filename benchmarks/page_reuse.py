"""What a checkpoint's save costs on this VM depends on which memory its page cache gets, not on the save.

This VM hands free memory back to its host (virtio-balloon free page reporting: the kernel's `page_reporting`
module reports free blocks of 2 MiB and more), and the first touch of such memory costs the touching process CPU
while the host backs the page again. Page-cache pages freed a moment ago (a deleted or evicted checkpoint) are
handed out again first, before they are reported: still backed. So the same bytes written and fsynced cost
several times more CPU when every earlier checkpoint is kept than when the previous one was deleted or evicted,
in one process, alternating.
That is why two programs comparing the same save on this machine must free and reuse memory alike
(`engines_direct`, `real_training`: the files' lifecycle of a studyctl point). A bare-metal node has no such cost:
its page cache, full in steady state, is recycled by reclaim.

    python -m benchmarks.page_reuse [rounds]     (~1 minute)

Per round and way (in turn, the order rotating), SAVES checkpoints of SIZE bytes, each a fresh file written from
one buffer in BLOCK writes and fsynced; wall and process CPU seconds of each save after the first.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from studyctl import host

SIZE, BLOCK, SAVES = 160 << 20, 16 << 20, 6
WAYS = ("kept", "deleted", "evicted")  # what happens to each checkpoint after its save


def memory_return() -> str:
    """How this machine hands idle memory back to a host (`studyctl.host.memory_return`), as a header line: every
    figure that takes fresh memory depends on it (`min_free_ms` 0 here by default; 60000 held back both sides'
    bimodal persists, `benchmarks/RESULTS.md`)."""
    return "memory handed back to the host: " + (host.memory_return() or "none the kernel shows")


def save(path: Path, buf: bytes) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(buf)
        for off in range(0, SIZE, BLOCK):
            os.write(fd, view[off:off + BLOCK])
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - wall, time.process_time() - cpu


def after(way: str, path: Path) -> None:
    if way == "deleted":
        path.unlink()
    elif way == "evicted":
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run(way: str, root: Path, buf: bytes) -> list[tuple[float, float]]:
    """SAVES checkpoints the `way`; the figures of all but the first (which finds whatever the last way left)."""
    d = Path(tempfile.mkdtemp(prefix=f"{way}-", dir=root))
    try:
        got = []
        for i in range(SAVES):
            path = d / f"step{i}"
            got.append(save(path, buf))
            after(way, path)
        return got[1:]
    finally:
        shutil.rmtree(d)


def main(rounds: int = 3, scratch: Path = Path("/var/tmp")) -> dict[str, list[tuple[float, float]]]:
    buf = os.urandom(SIZE)
    root = Path(tempfile.mkdtemp(prefix="page-reuse-", dir=scratch))
    got: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    try:
        for r in range(rounds):
            for way in WAYS[r % len(WAYS):] + WAYS[:r % len(WAYS)]:
                got[way] += run(way, root, buf)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n## A save's cost and the memory its page cache gets (`python -m benchmarks.page_reuse {rounds}`)")
    print(f"# {SIZE >> 20} MiB a checkpoint, {BLOCK >> 20} MiB writes + fsync, {SAVES - 1} saves a way a round, "
          f"{rounds} rounds; load after {os.getloadavg()[0]:.1f}; this VM's balloon reports free memory to its host")
    print("| each checkpoint after its save | wall s (median, min-max) | CPU s (median, min-max) | CPU / kept |")
    print("|---|---|---|---|")
    kept_cpu = statistics.median(c for _, c in got["kept"])
    for way in WAYS:
        walls, cpus = [w for w, _ in got[way]], [c for _, c in got[way]]
        print(f"| {way} | {statistics.median(walls):.3f} ({min(walls):.3f}–{max(walls):.3f}) | "
              f"{statistics.median(cpus):.3f} ({min(cpus):.3f}–{max(cpus):.3f}) | "
              f"{statistics.median(cpus) / kept_cpu:.2f}x |")
    return got


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
