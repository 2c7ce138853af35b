"""Every plot of a study's summary the data supports (`make_plots`): one call per collect that draws."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from studyctl.analysis.cells import with_fallbacks_shown
from studyctl.analysis.hardware.roofline import roofline_plots
from studyctl.analysis.outputs import PlotOutput
from studyctl.analysis.plots.bars import axis_bars
from studyctl.analysis.plots.plot import Plot
from studyctl.analysis.plots.ranks import rank_spread
from studyctl.analysis.plots.requests import request_bars
from studyctl.analysis.plots.scaling import (
    BANDWIDTH,
    DURATION,
    EFFICIENCY,
    checkpoint_size,
    scaling_plot,
    simulated,
)
from studyctl.analysis.values import file_stem


def _model_plots(summary: pd.DataFrame, model: str, out_dir: Path) -> tuple[list[Plot], list[str]]:
    data = summary[summary["model"] == model]
    safe = file_stem(model)
    caveat = " — simulated nodes (one machine, one disk): not a scaling measurement" if simulated(data) else ""
    made = [Plot("bandwidth", f"{model}: total bytes / total time vs nodes (95% CI; dotted: ideal scaling){caveat}",
                 scaling_plot(summary, model, BANDWIDTH, out_dir / f"bandwidth_{safe}.png"))]
    skipped = []
    if "write" in set(data["phase"]):
        size = checkpoint_size(data.loc[data["phase"] == "write", "bytes"])
        made.append(Plot("duration", f"{model}: time to checkpoint ({size} written), slowest rank, 95% CI",
                         scaling_plot(summary, model, DURATION, out_dir / f"duration_{safe}.png", "write")))
    else:
        skipped.append(f"time to checkpoint for {model}: no write phase")
    if data["nodes"].nunique() > 1:
        made.append(Plot("efficiency", f"{model}: scaling efficiency (measured / ideal){caveat}",
                         scaling_plot(summary, model, EFFICIENCY, out_dir / f"efficiency_{safe}.png")))
    else:
        skipped.append(f"scaling efficiency for {model}: a single node count ({int(data['nodes'].iloc[0])})")
    return made, skipped


def make_plots(summary: pd.DataFrame, ranks: pd.DataFrame, out_dir: Path) -> tuple[list[Plot], list[str]]:
    """Every plot the data supports; the second list says which were skipped and why."""
    if summary.empty:
        return [], ["all plots: no completed results yet, nothing to plot"]
    summary = with_fallbacks_shown(summary)
    made: list[Plot] = []
    skipped: list[str] = []
    for model in sorted(summary["model"].astype(str).unique()):
        m, s = _model_plots(summary, model, out_dir)
        made += m
        skipped += s
    more, why = roofline_plots(summary, out_dir)
    made, skipped = made + more, skipped + why
    path, reason = rank_spread(ranks, out_dir / "rank_spread.png", summary)
    if path:
        made.append(Plot("rank_spread", "Per-rank write bandwidth spread (stragglers)", path))
    else:
        skipped.append(str(reason))
    for axis, title in (("io_mode", "I/O mode"), ("filesystem", "Filesystems")):
        path, reason = axis_bars(summary, axis, out_dir / f"{axis}.png")
        if path:
            made.append(Plot("axis_bars", f"{title} side by side, every other axis held equal", path))
        else:
            skipped.append(str(reason))
    path, reason = request_bars(summary, out_dir / "requests.png")
    if path:
        made.append(Plot("requests", "Object store requests per checkpoint and restore, by kind", path))
    elif reason:
        skipped.append(reason)
    return made, skipped


# The summary's plots, drawn before every topic's (`analysis.outputs`).
BASE_PLOTS = (PlotOutput("summary", lambda t, out_dir: make_plots(t.summary, t.ranks, out_dir)),)
