"""Orchestrator at scale: planning a 100,000-point study, and a 100,000-point ledger.

Targets (the orchestrator's scale targets): expand + plan 100k points < 2 s; record 100k state updates and
answer `status` on a 100k-point study < 2 s. Prints median/min/max over repetitions.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from studyctl.attempt.records import Update
from studyctl.definition.planning.expand import iter_points
from studyctl.definition.planning.plan import plan_rows, summarize_plan
from studyctl.definition.planning.sweep import parse_sweep
from studyctl.states import State
from studyctl.study.ledger import Ledger

BIG_STUDY = {
    "study": "bench-big",
    "models": ["llama_7b", "llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t"],
    "matrix": {"zero_stage": [0, 1, 2, 3], "nodes": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
               "ranks_per_node": [4, 8], "io_mode": ["buffered", "direct", "hybrid"]},
    "zip": [{"model": ["llama_7b", "llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t"],
             "tensor_parallel": [1, 1, 8, 8, 8], "pipeline_parallel": [1, 1, 4, 32, 64]}],
    "filesystems": {name: {"path": f"/fs/{name}"} for name in "abcde"},
    "repetitions": 17,
}


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_plan(repeat: int) -> tuple[int, list[float]]:
    def run() -> int:
        sweep = parse_sweep(BIG_STUDY, Path("bench.yaml"))  # fresh caches each time: a cold `plan`
        from studyctl.definition.checkpoint import layout, points
        from studyctl.definition.planning import expand, needs, plan, strategies

        for fn in (expand._problems, expand._checkpoint_options, layout.summarize, layout.num_parameters,
                   points.restore_bytes, plan._sized, plan._settings, plan.storage_read_bytes,
                   strategies.host_snapshot_bytes, needs.training_needs):
            fn.cache_clear()
        return summarize_plan(plan_rows(iter_points(sweep), sweep)).points

    points = run()
    return points, timed(run, repeat)


def bench_ledger(n: int, repeat: int) -> tuple[list[float], list[float]]:
    updates_s, status_s = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "ledger.sqlite") as ledger:
            ledger.sync_points((f"p{i:06d}", i, {"i": i}, False, None) for i in range(n))
            ledger.new_attempts([(f"p{i:06d}", "slurm") for i in range(n)])
            t0 = time.perf_counter()
            ledger.record_updates([Update(f"p{i:06d}", 1, State.RUNNING) for i in range(n)])
            updates_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            counts = ledger.state_counts()
            rows = ledger.points()
            status_s.append(time.perf_counter() - t0)
            assert counts == {"RUNNING": n} and len(rows) == n
    return updates_s, status_s


def row(name: str, times: list[float], target: float) -> str:
    med = statistics.median(times)
    verdict = "ok" if med < target else "MISSED"
    return (f"{name:<44} median {med:6.3f} s  min {min(times):6.3f}  max {max(times):6.3f}  "
            f"target < {target:g} s  {verdict}")


def main(repeat: int = 5) -> int:
    points, plan_times = bench_plan(repeat)
    print(row(f"expand + plan {points:,} points", plan_times, 2.0))
    updates, status = bench_ledger(100_000, repeat)
    print(row("ledger: 100,000 state updates", updates, 2.0))
    print(row("ledger: status of 100,000 points", status, 2.0))
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
