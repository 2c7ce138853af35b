"""What a ceiling point costs and how sure its figures are, for one or more checkouts side by side.

Runs the same ceiling task (a ZeRO-1 layout whose largest shard is `--gib-per-rank` GiB, `--ranks` ranks on one
node of this machine) with the worker of each `--checkout` in turn, interleaved (A, B, A, B, ...) so a change in
the machine's load falls on both alike. Per checkout: wall and CPU seconds of the whole point (mpiexec and its
ranks), the bytes its storage probes moved, and per storage rate the rounds, the 95% CI half-width of the mean
of one run's rounds (relative), and how far apart the runs' figures are (max/min of the runs' medians: what two
identical runs of a study would show). A checkout's results without `ceilings.rounds` (older) are read from
their checkpoints (the largest probe's rounds).

Physical situation: this machine's one disk (ext4 on a virtio block device, shared with other work), 2 ranks
on one simulated node: one node's local disk, not a parallel filesystem; the figures are this machine's.

    .venv/bin/python -m benchmarks.ceiling_rounds --checkout /path/to/base --checkout . --runs 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.ceiling_vs_fio import ceiling_task
from benchmarks.worker_vs_fio import MPIEXEC
from studyctl.definition.inputs.tdist import t_quantile_975

RATES = ("storage_write_GiBps", "storage_read_GiBps")


def run_once(checkout: Path, task: Path, ranks: int) -> dict[str, Any]:
    """One ceiling point with `checkout`'s worker: its ceilings, checkpoints, wall and CPU seconds."""
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    before = os.times()
    start = time.perf_counter()
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "worker", str(task)],
                          capture_output=True, text=True, env=env, cwd=checkout)
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    result = json.loads((task.parent / "out" / "result.json").read_text())
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall_s": wall, "cpu_s": cpu, "ceilings": result["ceilings"], "checkpoints": result["checkpoints"]}


def rounds_of(run: dict[str, Any], rate: str) -> list[float]:
    recorded = run["ceilings"].get("rounds", {}).get(rate)
    if recorded:
        return list(recorded)
    phase = "write" if "write" in rate else "read"
    return [c["aggregate_GiBps"] for c in run["checkpoints"] if c["phase"] == phase]


def half_width(values: list[float]) -> float:
    """The 95% CI half-width of the mean, relative to it."""
    if len(values) < 2:
        return math.nan
    return t_quantile_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)) / \
        statistics.fmean(values)


def moved_gib(run: dict[str, Any]) -> float:
    """The storage probes' bytes: the largest probe's (the result's checkpoints) and, where it ran, the even
    probe's (the same rounds; its per-round bytes are not in the result, so the even share, capped as run)."""
    c = run["ceilings"]
    largest = sum(x["bytes"] for x in run["checkpoints"])
    rounds = len(run["checkpoints"]) // 2
    ran_even = c["even_write_GiBps"] != c["storage_write_GiBps"]
    per_rank = min(c["even_bytes"], max(r["bytes"] for x in run["checkpoints"] for r in x["ranks"]))
    even = 2 * rounds * per_rank * len(run["checkpoints"][0]["ranks"]) if ran_even else 0
    return (largest + even) / (1 << 30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", action="append", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--gib-per-rank", type=float, default=2.0)
    ap.add_argument("--dir", type=Path, default=None, help="scratch directory on the disk under test")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="studyctl-rounds-", dir=args.dir or "/var/tmp"))
    runs: dict[Path, list[dict[str, Any]]] = {c: [] for c in args.checkout}
    try:
        task, _ = ceiling_task(root, args.ranks, args.gib_per_rank, 16, "buffered")
        for i in range(args.runs):
            for checkout in args.checkout:
                runs[checkout].append(run_once(checkout, task, args.ranks))
                print(f"run {i + 1} {checkout}: {runs[checkout][-1]['wall_s']:.1f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"ceiling point, {args.ranks} ranks, largest shard {args.gib_per_rank:g} GiB per rank, buffered, "
          f"{args.runs} runs per checkout (this machine's disk)")
    for checkout, mine in runs.items():
        print(f"{checkout}: wall {statistics.fmean(r['wall_s'] for r in mine):.1f} s, "
              f"CPU {statistics.fmean(r['cpu_s'] for r in mine):.1f} s, "
              f"storage probes moved {statistics.fmean(moved_gib(r) for r in mine):.1f} GiB per run")
        for rate in RATES:
            per_run = [rounds_of(r, rate) for r in mine]
            medians = [statistics.median(v) for v in per_run]
            print(f"  {rate}: rounds {[len(v) for v in per_run]}, median {statistics.median(medians):.3f} GiB/s, "
                  f"CI ±{statistics.fmean(half_width(v) for v in per_run):.1%} (mean of runs), "
                  f"runs' medians max/min {max(medians) / min(medians):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
