"""What checkpoints cost training, as PNG plots of the `training` table alone (matplotlib Agg).

overhead_<model>.png: checkpoint overhead (% of training time) vs nodes, one line per strategy (solid:
at the sweep's interval; dotted: at each point's Young/Daly interval when a failure rate is given).
restore_time.png: `plots.restore` (time to restore per restore mode, each setting that varies apart).
Values are means over repetitions; projected to the nominal checkpoint size when the run was scaled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.lines import Line2D

from studyctl.analysis.plots.plot import Plot
from studyctl.analysis.plots.restore import restore_time
from studyctl.analysis.plots.style import nodes_axis, plt, save
from studyctl.analysis.values import file_stem

STRATEGY_COLOURS = {"sync": "#d62728", "async": "#1f77b4", "tiered": "#2ca02c"}
RESTORE_COLOURS = {"rank": "#9467bd", "full": "#ff7f0e", "broadcast": "#17becf"}
# What tells two lines of one strategy apart, shown only when it varies (the restore mode does not change
# what a write costs: points that differ only by it are pooled).
DETAIL = ("filesystem", "io_mode", "zero_stage", "ranks_per_node", "drain", "tier_keep")


def _varying(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[str]:
    """Columns that take more than one value within some strategy (a tier setting varies only among tiered)."""
    return [c for c in columns if c in frame and (frame.groupby("strategy")[c].nunique() > 1).any()]


def _label(strategy: Any, detail: list[str], values: tuple[Any, ...]) -> str:
    parts = [f"{c}={v}" for c, v in zip(detail, values, strict=True) if v == v and v is not None]
    return " ".join([str(strategy), *parts])


def _cells(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Means over repetitions per cell."""
    numeric = [c for c in ("overhead_share", "optimal_overhead_share", "restore_s", "read_s", "broadcast_s",
                           "goodput", "restore_bytes", "projection_factor") if c in frame]
    return frame.groupby(keys, dropna=False, sort=True)[numeric].mean().reset_index()


def overhead_vs_nodes(training: pd.DataFrame, model: str, path: Path) -> Path:
    data = training[(training["model"] == model) & training["overhead_share"].notna()]
    detail = _varying(data, DETAIL)
    cells = _cells(data, ["strategy", *detail, "nodes"])
    fig, ax = plt.subplots(figsize=(6.6, 4.6))
    styles = ("-", "--", "-.", ":")
    for i, (key, g) in enumerate(cells.groupby(["strategy", *detail], dropna=False, sort=True)):
        key = key if isinstance(key, tuple) else (key,)
        colour = STRATEGY_COLOURS.get(str(key[0]), "black")
        label = _label(key[0], detail, key[1:])
        g = g.sort_values("nodes")
        ax.plot(g["nodes"], g["overhead_share"] * 100, color=colour, marker="o", linewidth=1.8,
                linestyle=styles[i % len(styles)] if detail else "-", label=label)
        if g["optimal_overhead_share"].notna().any():
            ax.plot(g["nodes"], g["optimal_overhead_share"] * 100, color=colour, marker=".", linewidth=1.0,
                    linestyle=(0, (1, 2)), alpha=0.8)
    nodes_axis(ax, data["nodes"])
    ax.set_ylim(bottom=0)
    ax.set_ylabel("checkpoint overhead (% of training time)")
    interval = float(data["interval_s"].iloc[0])
    projected = " (projected to full size)" if bool(data["projected"].any()) else ""
    ax.set_title(f"{model}: overhead at a {_duration(interval)} interval{projected}")
    handles, labels = ax.get_legend_handles_labels()
    if data["optimal_overhead_share"].notna().any():
        handles.append(Line2D([], [], color="grey", linestyle=(0, (1, 2)), marker="."))
        labels.append("dotted: at the Young/Daly interval")
    return save(fig, path, handles, labels, "strategy (mean over repetitions)")


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def training_plots(training: pd.DataFrame, out_dir: Path) -> tuple[list[Plot], list[str]]:
    """The plots the table supports; the second list says which were skipped and why."""
    if training.empty or "overhead_share" not in training:
        return [], ["training cost plots: no measured checkpoint writes"]
    made: list[Plot] = []
    skipped: list[str] = []
    for model in sorted(training["model"].astype(str).unique()):
        safe = file_stem(model)
        made.append(Plot("overhead", f"Checkpoint overhead vs nodes per strategy (share of training time): {model}",
                         overhead_vs_nodes(training, model, out_dir / f"overhead_{safe}.png")))
    if training["restore_s"].notna().any():
        made.append(Plot("restore_time", "Restore time per restore mode",
                         restore_time(training, out_dir / "restore_time.png")))
    else:
        skipped.append("restore time per restore mode: no restores measured")
    return made, skipped
