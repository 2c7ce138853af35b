"""Time to the first training step after a failure, per recovery scenario, as one PNG of the
recovery cells alone: a stacked bar per cell (launch, restore, ready), the 95% CI of the whole on top, and the
cell's own same-shape restore (its restore mode's, measured in the writing world) as a marker beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.cells import independent, varying
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.plot import Plot
from studyctl.analysis.plots.style import plt, save
from studyctl.analysis.values import missing

MAX_BARS = 24
PARTS = (("launch_s", "launch", "#4c72b0"), ("setup_s", "setup (between the phases)", "#8c8c8c"),
         ("restore_s", "restore", "#dd8452"), ("ready_s", "ready (barrier + step)", "#55a868"))


def recovery_axes(cells: pd.DataFrame) -> list[str]:
    """The settings that vary between recovery cells, `recovery.table` first (the scenario is the plot's subject)."""
    moving = varying(cells, exclude=("tool",))
    axes = independent(cells, moving) if moving else []
    return ["recovery", *[a for a in axes if a != "recovery"]] if "recovery" in cells else axes


def time_to_first_step(cells: pd.DataFrame, path: Path, axes: list[str]) -> Path:
    data = cells.sort_values(axes, key=lambda c: c.astype(str)).head(MAX_BARS)
    if kept(path, data, axes):
        return path
    x = np.arange(len(data))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(data) + 2.5), 4.8))
    bottom = np.zeros(len(data))
    handles: list[Any] = []
    labels: list[str] = []
    for col, label, color in PARTS:
        values = data[col].fillna(0).to_numpy(dtype=float) if col in data else np.zeros(len(data))
        handles.append(ax.bar(x, values, 0.6, bottom=bottom, color=color, edgecolor="black", linewidth=0.4))
        labels.append(label)
        bottom += values
    ax.errorbar(x, data["time_to_first_step_s"], yerr=data["time_to_first_step_s_ci95"].fillna(0), fmt="none",
                ecolor="black", capsize=3, elinewidth=1.0)
    if data["same_shape_restore_s"].notna().any():
        handles.append(ax.scatter(x + 0.38, data["same_shape_restore_s"], marker="D", color="black", s=18, zorder=3))
        labels.append("same-shape restore of the writing world (its restore mode)")
    ax.set_xticks(x)
    ax.set_xticklabels([describe_cell(r, [a for a in axes if not missing(r.get(a))]).replace(", ", "\n")
                        for r in data.to_dict("records")], fontsize=7.5)
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    simulated = " (simulated nodes: one machine and its clock)" if bool(data["simulated_nodes"].any()) else ""
    ax.set_title(f"Time to the first training step after a failure, per scenario, 95% CI{simulated}", fontsize=9)
    return save(fig, path, handles, labels, None)


def recovery_plots(cells: pd.DataFrame, out_dir: Path) -> tuple[list[Plot], list[str]]:
    """The plot, when the study restarted any point; else why not (said only when a restart was asked for)."""
    if cells.empty:
        return [], []
    return [Plot("recovery", "Time to the first training step after a failure, per recovery scenario (95% CI)",
                 time_to_first_step(cells, out_dir / "recovery.png", recovery_axes(cells)))], []
