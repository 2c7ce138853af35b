"""`studyctl plan` of one restart point (recovery grow_to) at 1k, 10k and 100k ranks, before and after the plan's
restart figures were found by arithmetic (`definition.checkpoint.reshard_counts`) instead of by listing every rank's
reads.

Each figure is the plan of one sweep in a fresh process (expansion, every plan row and its restart columns, the
capacity judgement: what `studyctl plan` computes, without printing), CPU seconds of that process (the machine
may be shared; wall seconds beside them), the median of `repeat` runs. "Before" is the commit before
`reshard_counts.py` was added, checked out into a temporary git worktree and run the same way; a run past
`--limit` seconds is stopped and shown as such. The llama_7b checkpoint is written by a tenth of the ranks
(TP 2, 4 ranks per node) and restored onto all of them, under ZeRO-1 and ZeRO-3 (every rank its own shard).
Target: 100k ranks in well under 2 s, growing at most linearly with the ranks.

`python -m benchmarks plan_restart [repeat] [limit_s]`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RANKS = (1_000, 10_000, 100_000)
ZERO = (1, 3)
ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
PROBE = """
import sys, time
from pathlib import Path
t0, c0 = time.perf_counter(), time.process_time()
from studyctl.api import plan
p = plan(Path(sys.argv[1]))
for _ in p.rows():
    pass
p.capacity()
print(time.process_time() - c0, time.perf_counter() - t0)
"""


def sweep_text(ranks: int, zero: int) -> str:
    return (f"study: plan-restart\nmodels: [llama_7b]\nmatrix:\n  zero_stage: {zero}\n  nodes: {ranks // 40}\n"
            f"  ranks_per_node: 4\n  tensor_parallel: 2\n  recovery: [{{grow_to: {ranks}}}]\n"
            "filesystems:\n  scratch: {path: /tmp, kind: local}\n"
            "checkpoint: {scale: 0.005, writes: 1, reads: 1, buffer_mib: 16, block_mib: 4}\n"
            "ceilings: off\ncalibration: off\n")


def timed(code: Path, sweep: Path, repeat: int, limit_s: float) -> tuple[float, float] | None:
    """Median (CPU, wall) seconds of planning `sweep` with the code at `code`; None past the limit."""
    cpu, wall = [], []
    for _ in range(repeat):
        try:
            out = subprocess.run([sys.executable, "-c", PROBE, str(sweep)], cwd=code, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": str(code)}, timeout=limit_s, check=True)
        except subprocess.TimeoutExpired:
            return None
        c, w = map(float, out.stdout.split())
        cpu.append(c)
        wall.append(w)
    return statistics.median(cpu), statistics.median(wall)


def before_commit() -> str:
    added = subprocess.run(["git", "log", "--follow", "--diff-filter=A", "--format=%H", "--",
                            "studyctl/definition/checkpoint/reshard_counts.py"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return f"{added[-1]}^" if added else "HEAD"


def show(result: tuple[float, float] | None, limit_s: float) -> str:
    return f"> {limit_s:g} s (stopped)" if result is None else f"{result[0]:7.2f} s CPU ({result[1]:6.2f} wall)"


def main(repeat: int = 3, limit_s: float = 300.0) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        commit = before_commit()
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(old), commit], cwd=ROOT, check=True)
        try:
            print(f"## plan of one restart point: before ({commit}) and after, median of {repeat}, "
                  f"target < {TARGET_S:g} s at 100k ranks")
            for zero in ZERO:
                stopped = False
                for ranks in RANKS:
                    sweep = Path(tmp) / f"z{zero}-{ranks}.yaml"
                    sweep.write_text(sweep_text(ranks, zero))
                    after = timed(ROOT, sweep, repeat, limit_s)
                    before = None if stopped else timed(old, sweep, 1, limit_s)  # once: minutes each
                    stopped = before is None  # a larger world takes longer still
                    ratio = f"  {before[0] / after[0]:6.1f}× less CPU" if before and after else ""
                    print(f"ZeRO-{zero} {ranks:>7,} ranks: before {show(before, limit_s)}  after "
                          f"{show(after, limit_s)}{ratio}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:2]), *(float(a) for a in sys.argv[2:3])))
