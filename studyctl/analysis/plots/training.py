"""What checkpoints cost training, as PNG plots of the `training` table alone (matplotlib Agg).

overhead_<model>.png: checkpoint overhead (% of training time) vs nodes, one line per strategy (solid:
at the sweep's interval; dotted: at each point's Young/Daly interval when a failure rate is given).
restore_time.png: time to restore per restore mode (and tier), the broadcast share hatched.
Values are means over repetitions; projected to the nominal checkpoint size when the run was scaled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from studyctl.analysis.plots.plot import Plot
from studyctl.analysis.plots.style import nodes_axis, plt, save
from studyctl.analysis.values import file_stem
from studyctl.units import format_bytes

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


def restore_time(training: pd.DataFrame, path: Path, limit: int = 16) -> Path:
    data = training[training["restore_s"].notna()]
    cells = _cells(data, ["model", "strategy", "nodes", "restore"])
    groups = list(cells.groupby(["model", "strategy", "nodes"], sort=True))[:limit]
    modes = [m for m in RESTORE_COLOURS if m in set(cells["restore"])]
    width = 0.8 / max(len(modes), 1)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.5 * len(groups) * len(modes) + 2.5), 4.8))
    for j, (_, g) in enumerate(groups):
        for i, mode in enumerate(modes):
            row = g[g["restore"] == mode]
            if row.empty:
                continue
            x = j + (i - (len(modes) - 1) / 2) * width
            total, bcast = float(row["restore_s"].iloc[0]), float(row["broadcast_s"].fillna(0).iloc[0])
            ax.bar(x, total, width, color=RESTORE_COLOURS[mode], edgecolor="black", linewidth=0.4,
                   label=mode if j == 0 else None)
            if bcast > 0:
                ax.bar(x, min(bcast, total), width, bottom=total - min(bcast, total), color="none", hatch="//",
                       edgecolor="black", linewidth=0.4)
            restored = float(row["restore_bytes"].iloc[0] * row["projection_factor"].iloc[0])
            ax.annotate(format_bytes(restored, 0), (x, total), ha="center", va="bottom", fontsize=7.5,
                        xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{m}\n{s}\n{n} nodes" for (m, s, n), _ in groups], fontsize=8.5)
    ax.set_ylabel("time to restore, slowest rank (s)")
    ax.set_ylim(bottom=0)
    projected = " (projected to full size)" if bool(data["projected"].any()) else ""
    ax.set_title(f"Restore time per restore mode{projected}; above each bar: bytes restored")
    handles, labels = ax.get_legend_handles_labels()
    if data["broadcast_s"].fillna(0).gt(0).any():
        handles.append(Patch(facecolor="none", edgecolor="black", hatch="//"))
        labels.append("MPI_Bcast share")
    return save(fig, path, handles, labels, "restore mode")


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
