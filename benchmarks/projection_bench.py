"""Projections to full size against a full-size run, the way a study makes them: library API, local backend.

The checkpoint: gpt2-1.5b (20.3 GiB at scale 1.0), ZeRO-3, direct I/O, 1 node × 2 ranks, 2 writes + 2 reads, block
16 MiB. Per run, three studies back to back on one scratch disk:
  1. the reference before: the checkpoint at scale 1.0, once;
  2. the study under test: scale 0.002, 2 repetitions, the default `calibration:` (the points it adds are the
     product's choice, not the benchmark's); its report's `projected_full_size_s` per phase (time per checkpoint,
     first rank's start to last rank's end) with its 95% band, and plain scaling (nominal bytes over the cell's own
     bandwidth) for comparison;
  3. the reference after: scale 1.0 again.
This disk swings 20–100% from one minute to the next (docs/io-limits.md), so the reference is taken the way
those notes prescribe for fio: the mean of the runs right before and right after, the run discarded where those two
differ by more than 15%, and the verdict the median over at least 3 valid runs. Target: the fit within ±10%.
The band's coverage: a 95% prediction band is for one run at full size, so every reference run (before and after,
valid or not: the disk's swings are what a band must hold) is checked against it; printed as "k of n", with the
fewest of n a true 95% band would hold with probability 95% (binomial), so "about 95%" has a count behind it.
Needs ~45 GiB free on the scratch dir; everything is removed after each study (PROJECTION_BENCH_KEEP=DIR keeps
each study's tables/checkpoints.csv there). `python -m benchmarks projection [runs] [scratch dir]`.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL = "gpt2-1.5b"
SMALL_SCALE = 0.002
MAX_REFERENCE_SPREAD = 0.15  # a fair reference here: runs before and after within 15% (docs/io-limits.md)
TARGET = 0.10
PHASES = ("write", "read")
SWEEP = """study: {name}
models: [{model}]
matrix:
  zero_stage: 3
  nodes: 1
  ranks_per_node: 2
  io_mode: direct
filesystems:
  scratch: {{path: {data}, kind: local}}
repetitions: {repetitions}
checkpoint:
  scale: {scale}
  writes: 2
  reads: 2
  buffer_mib: 64
  block_mib: 16
ceilings: off
local:
  max_concurrent: 1
  timeout_s: 1800
"""


@dataclass(frozen=True)
class PhaseResult:
    phase: str
    reference_s: tuple[float, float]  # the full-size time per checkpoint before and after
    fitted_s: float
    low_s: float
    high_s: float
    plain_s: float
    basis: str
    reach: float

    @property
    def measured_s(self) -> float:
        return statistics.mean(self.reference_s)

    @property
    def spread(self) -> float:
        return abs(self.reference_s[0] - self.reference_s[1]) / self.measured_s

    @property
    def valid(self) -> bool:
        return self.spread <= MAX_REFERENCE_SPREAD


def run_study(scratch: Path, name: str, scale: float, repetitions: int) -> Any:
    """One study in a directory of its own, removed afterwards; its tables."""
    from studyctl import api
    from studyctl.analysis.tables import build_tables

    root = Path(tempfile.mkdtemp(prefix="projection-bench-", dir=scratch))
    try:
        (root / "data").mkdir()
        sweep = root / "sweep.yaml"
        sweep.write_text(SWEEP.format(name=name, model=MODEL, data=root / "data", repetitions=repetitions,
                                      scale=scale))
        api.submit(sweep, "local", results=root / "results")
        tables = build_tables(root / "results" / name)
        if keep := os.environ.get("PROJECTION_BENCH_KEEP"):
            Path(keep).mkdir(parents=True, exist_ok=True)
            tables.checkpoints.to_csv(Path(keep) / f"{name}-{time.strftime('%H%M%S')}.csv", index=False)
        return tables
    finally:
        shutil.rmtree(root, ignore_errors=True)


def span_per_checkpoint(tables: Any, phase: str) -> float:
    rows = tables.checkpoints[tables.checkpoints["phase"] == phase]
    return float(rows["span_s"].mean())


def one_run(scratch: Path) -> tuple[list[PhaseResult], str]:
    """Reference, study under test, reference; and how it ran (seconds, load average: the disk is shared)."""
    started = time.monotonic()
    before = run_study(scratch, "reference-before", 1.0, 1)
    small = run_study(scratch, "under-test", SMALL_SCALE, 2)
    after = run_study(scratch, "reference-after", 1.0, 1)
    note = f"{time.monotonic() - started:.0f} s, load {os.getloadavg()[0]:.1f}"
    return [phase_result(small, before, after, phase) for phase in PHASES], note


def phase_result(small: Any, before: Any, after: Any, phase: str) -> PhaseResult:
    cells = small.summary[small.summary["phase"] == phase]
    assert len(cells) == 1, f"one {phase} cell expected, found {len(cells)}"
    cell = cells.iloc[0]
    rows = small.checkpoints[(small.checkpoints["phase"] == phase) & (small.checkpoints["role"] == "measure")]
    bandwidth = float(rows["bytes"].sum()) / float(rows["span_s"].sum())
    full_bytes = float(before.checkpoints[before.checkpoints["phase"] == phase]["bytes"].iloc[0])
    return PhaseResult(phase, (span_per_checkpoint(before, phase), span_per_checkpoint(after, phase)),
                       float(cell["projected_full_size_s"]), float(cell["projected_full_size_s_lo"]),
                       float(cell["projected_full_size_s_hi"]), full_bytes / bandwidth, str(cell["projection_basis"]),
                       float(cell["projection_reach"]))


def describe(run: int, results: list[PhaseResult], note: str) -> list[str]:
    lines = []
    for r in results:
        state = "valid" if r.valid else f"discarded: before/after differ by {r.spread:.0%}"
        lines.append(f"| {run} | {r.phase} | {r.fitted_s:.1f} ({r.low_s:.1f}–{r.high_s:.1f}) | {r.plain_s:.1f} | "
                     f"{r.measured_s:.1f} ({r.reference_s[0]:.1f}, {r.reference_s[1]:.1f}) | "
                     f"**{r.fitted_s / r.measured_s:.2f}** | {r.plain_s / r.measured_s:.2f} | {state} | {note} |")
    return lines


def coverage_floor(n: int, nominal: float = 0.95, alpha: float = 0.05) -> int:
    """The fewest of n references a band of true coverage `nominal` holds with probability ≥ 1 − alpha: a count
    below it says the band is too narrow (P(X < floor) ≤ alpha for X ~ Binomial(n, nominal))."""
    below = 0.0
    for k in range(n + 1):
        below += math.comb(n, k) * nominal ** k * (1 - nominal) ** (n - k)
        if below > alpha:
            return k
    return n


def coverage(runs: list[list[PhaseResult]]) -> list[str]:
    """Per phase and over both: how many full-size reference runs lie inside the 95% band."""
    lines = []
    for name in (*PHASES, "both"):
        phases = PHASES if name == "both" else (name,)
        refs = [(ref, r) for results in runs for r in results if r.phase in phases for ref in r.reference_s]
        if not refs:
            continue
        inside = sum(r.low_s <= ref <= r.high_s for ref, r in refs)
        below = sum(ref < r.low_s for ref, r in refs)
        floor = coverage_floor(len(refs))
        judged = "consistent with 95%" if inside >= floor else "too narrow for 95%"
        lines.append(f"# band coverage, {name}: {inside} of {len(refs)} full-size reference runs inside the 95% "
                     f"band ({inside / len(refs):.0%}; {below} below it, {len(refs) - inside - below} above); a "
                     f"true 95% band holds at least {floor} of {len(refs)} with probability 95%: {judged}")
    return lines


def verdict(runs: list[list[PhaseResult]]) -> list[str]:
    """Per phase, the median ratio over the valid runs, and whether it is within the target."""
    lines = []
    for phase in PHASES:
        valid = [r for results in runs for r in results if r.phase == phase and r.valid]
        if len(valid) < 3:
            lines.append(f"# {phase}: {len(valid)} valid runs of {len(runs)}: fewer than 3, no verdict")
            continue
        fitted = statistics.median(r.fitted_s / r.measured_s for r in valid)
        plain = statistics.median(r.plain_s / r.measured_s for r in valid)
        inside = sum(r.low_s <= r.measured_s <= r.high_s for r in valid)
        ok = "within" if abs(fitted - 1) <= TARGET else "NOT within"
        lines.append(f"# {phase}: fitted / measured, median of {len(valid)} valid runs {fitted:.2f} ({ok} "
                     f"±{TARGET:.0%}); plain scaling {plain:.2f}; measured inside the 95% band in {inside} of "
                     f"{len(valid)}")
    return lines


def main(runs: int = 3, scratch: str | None = None) -> None:
    done: list[list[PhaseResult]] = []
    print("| run | phase | fitted s (95% band) | plain s | measured s (before, after) | fit ratio | plain ratio | "
          "reference | run |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    for run in range(1, runs + 1):
        results, note = one_run(Path(scratch or "/var/tmp"))
        done.append(results)
        print("\n".join(describe(run, results, note)), flush=True)
    print(f"# the fit: {done[-1][0].basis}; reach {done[-1][0].reach:.0f}× beyond the largest bytes per rank measured")
    print("\n".join(verdict(done)))
    print("\n".join(coverage(done)))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else None)
