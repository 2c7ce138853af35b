"""collect at scale: 10,000 result files (target < 10 s), a re-collect with nothing new (target < 1 s) and
one after one file changed (target < 5 s); beside it, the training table's own share of a collect.

Generates schema-valid result files (tests/resultgen.py: 3 writes + 3 reads, 2-16 ranks each) in a
temporary study directory, then times `studyctl.collect.collect` cold (every file validated), warm
(nothing new: the fingerprint short-cut) and after one result changed (its point re-measured 7% faster: that
file re-validated, the rest from the parse cache, the tables, plots and report its cells feed made again).

    .venv/bin/python -m benchmarks.collect_bench [N] [REPEATS]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from studyctl.analysis.collect import collect
from studyctl.analysis.results import load_rows
from studyctl.analysis.training.cells import cost_cells
from studyctl.analysis.training.cost import load_training, training_table
from studyctl.attempt.paths import StudyPaths
from tests.resultgen import make_point, write_result


def write_point(study: Path, i: int, faster: float = 1.0) -> Path:
    """The i-th point's result file; `faster` scales its measured bandwidths (a re-run that measured otherwise)."""
    nodes = [1, 2, 4, 8][i % 4]
    point = make_point(zero=[1, 3][(i // 4) % 2], nodes=nodes, rpn=2,
                       io_mode=["buffered", "direct"][(i // 8) % 2], rep=i // 16, writes=3, reads=3)
    bw = 2.0 * nodes ** 0.8 * (1 + 0.03 * ((i * 7919) % 11 - 5) / 5) * faster
    return write_result(study, point, [bw, bw * 1.01, bw * 0.99], [bw * 1.2, bw * 1.21, bw * 1.19])


def make_study(root: Path, n: int) -> Path:
    study = root / "bench-collect"
    study.mkdir(parents=True)
    for i in range(n):
        write_point(study, i)
    return study


# CPU seconds of each timed call, beside its wall time: less moved by a busy machine. The collect's worker processes
# (a cold collect parses in one per core) are counted too: their CPU is the parse's, only spent elsewhere.
CPU: list[float] = []


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0, c0 = time.perf_counter(), _cpu()
    out = fn()
    CPU.append(_cpu() - c0)
    return time.perf_counter() - t0, out


def training_share(study: Path) -> float:
    """Seconds the training table and its cells take of a collect (the rows as the parse cache gives them)."""
    paths = StudyPaths(study)
    rows = [r["training"] for r in load_rows(paths).rows]
    t0 = time.perf_counter()
    cost_cells(training_table(rows, load_training(paths.sweep_copy)))
    return time.perf_counter() - t0


def main(n: int = 10_000, repeat: int = 3) -> int:
    cold, warm, one, training = [], [], [], []
    cpu: dict[str, list[float]] = {"cold": [], "warm": [], "one": []}
    for _ in range(repeat):
        root = Path(tempfile.mkdtemp(prefix="studyctl-collect-bench-"))
        try:
            t0 = time.perf_counter()
            study = make_study(root, n)
            print(f"generated {n:,} result files in {time.perf_counter() - t0:.1f} s", flush=True)
            dt, out = timed(lambda s=study: collect(s))
            assert out.points == n and not out.problems, (out.points, out.problems[:3])
            cold.append(dt)
            cpu["cold"].append(CPU[-1])
            dt, out = timed(lambda s=study: collect(s))
            assert out.unchanged
            warm.append(dt)
            cpu["warm"].append(CPU[-1])
            before = write_point(study, 0).read_bytes()  # a real change: other measured times, still plausible
            assert write_point(study, 0, faster=1.07).read_bytes() != before
            dt, out = timed(lambda s=study: collect(s))
            assert not out.unchanged and out.files_read == 1 and out.files_cached == n - 1
            one.append(dt)
            cpu["one"].append(CPU[-1])
            training.append(training_share(study))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    for name, times, cpus, target in ((f"collect {n:,} result files (cold)", cold, cpu["cold"], 10.0),
                                      ("re-collect, nothing new", warm, cpu["warm"], 1.0),
                                      ("re-collect, one file changed", one, cpu["one"], 5.0),
                                      ("  of it: training table + cells", training, None, None)):
        med = statistics.median(times)
        verdict = "" if target is None else (f"target < {target:g} s  median/target {med / target:5.2f}  "
                                             f"{'ok' if med < target else 'MISSED'}")
        used = "" if cpus is None else f"  cpu {statistics.median(cpus):6.3f} s"
        print(f"{name:<40} median {med:6.3f} s  min {min(times):6.3f}  max {max(times):6.3f}{used}  {verdict}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))
