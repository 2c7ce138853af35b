"""Projections to full size against a full-size run (issue 21), through the library API and the local backend.

gpt2-1.5b (a 20.3 GiB checkpoint at scale 1.0), ZeRO-3, direct I/O, 2 ranks, 2 writes + 2 reads, 2 repetitions,
at a few small scales and at scale 1.0. For write and read it prints, as ratios to the measured full-size time
(mean span per checkpoint at scale 1.0): the plain scaling from each small scale (nominal bytes over that run's
bandwidth) and the fitted projection from all the small scales together (`studyctl.analysis.projection`), with its
95% band. Target: the fit within ±10%. Needs ~45 GiB free on SCRATCH; everything is removed afterwards.
`python -m benchmarks projection [scratch dir]`.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

SMALL_SCALES = (0.002, 0.01, 0.05, 0.1, 0.25)
SWEEP = """study: projection-bench
models: [gpt2-1.5b]
matrix:
  zero_stage: 3
  nodes: 1
  ranks_per_node: 2
  io_mode: direct
  scale: [{scales}]
filesystems:
  scratch:
    path: {data}
    kind: local
repetitions: 2
checkpoint:
  writes: 2
  reads: 2
  buffer_mib: 64
  block_mib: 16
calibration:
  enabled: false
local:
  max_concurrent: 1
  timeout_s: 1800
"""


def run_study(root: Path) -> object:
    """Every scale, small and full, in one study; the checkpoint rows of its results (all of them)."""
    from studyctl import api
    from studyctl.analysis.tables import build_tables

    data = root / "data"
    data.mkdir()
    sweep = root / "sweep.yaml"
    sweep.write_text(SWEEP.format(scales=", ".join(map(str, (*SMALL_SCALES, 1.0))), data=data))
    started = time.monotonic()
    report = api.submit(sweep, "local", results=root / "results")
    print(f"# study ran {report.launched} points in {time.monotonic() - started:.0f} s")
    return build_tables(root / "results" / "projection-bench").checkpoints


def compare(checkpoints: object) -> list[str]:
    """Rows of the table: per phase, plain scaling per small scale and the fit, as ratios to the full-size run."""
    import pandas as pd

    from studyctl.analysis.projection import fit, plain_projection
    from studyctl.analysis.projection_table import run_observations

    assert isinstance(checkpoints, pd.DataFrame)
    lines = ["| phase | projection from | projected s | band (95%) | measured full size s | ratio |",
             "|---|---|---|---|---|---|"]
    small = checkpoints[checkpoints["scale"] < 1.0]
    full = checkpoints[checkpoints["scale"] == 1.0]
    for phase in ("write", "read"):
        measured_rows = full[full["phase"] == phase]
        measured = float(measured_rows["span_s"].mean())
        nominal = float(measured_rows["bytes"].iloc[0])
        active = int(measured_rows["active_ranks"].max())
        files = float(measured_rows["files"].iloc[0]) / active
        for scale in SMALL_SCALES:
            rows = small[(small["phase"] == phase) & (small["scale"] == scale)]
            bandwidth = float(rows["bytes"].sum()) / float(rows["span_s"].sum()) / (1 << 30)
            plain = plain_projection(nominal, bandwidth, scale)
            assert plain is not None
            lines.append(f"| {phase} | plain scaling, scale {scale:g} | {plain.seconds:.1f} | – | {measured:.1f} | "
                         f"{plain.seconds / measured:.2f} |")
        observations = [o for obs in run_observations(small[small["phase"] == phase]).values() for o in obs]
        for top in SMALL_SCALES[1:]:  # the fit from the smallest scales up to `top`: how far it reaches
            fitted = fit([o for o in observations if o.scale <= top])
            assert fitted is not None, "no fit from the small scales"
            p = fitted.predict(files, nominal / active)
            used = [s for s in SMALL_SCALES if s <= top]
            lines.append(f"| {phase} | **fit**, scales {', '.join(map(str, used))} ({fitted.n} runs, reach "
                         f"{p.reach:.0f}×) | {p.seconds:.1f} | {p.low_s:.1f}–{p.high_s:.1f} | {measured:.1f} | "
                         f"**{p.seconds / measured:.2f}** |")
        spread = [float(s) for s in measured_rows.groupby("point_id")["span_s"].mean()]
        lines.append(f"| {phase} | (full size: repetitions {', '.join(f'{s:.1f}' for s in spread)} s; fitted "
                     f"fixed {fitted.coef[0] * 1000:.0f} ms, {fitted.bandwidth_GiBps:.2f} GiB/s per rank; "
                     f"rep spread {statistics.pstdev(spread) / measured:.1%}) | | | | |")
    return lines


def main(scratch: str | None = None) -> None:
    root = Path(tempfile.mkdtemp(prefix="projection-bench-", dir=scratch or "/var/tmp"))
    try:
        print("\n".join(compare(run_study(root))))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
