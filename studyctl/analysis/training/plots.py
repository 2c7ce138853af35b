"""What checkpoints cost training, as PNG plots of the `training` table alone (matplotlib Agg).

Both plots draw cells (`training.cells.cost_cells`): the mean over repetitions with its 95% CI as an error bar,
one series per combination of the settings that vary (nothing pooled), styled through `style.encode`.
overhead_<model>.png: total waste at the sweep's interval vs nodes (solid), and at Daly's interval (dotted)
when a failure rate is given. restore_time.png: the restore a failure needs per cell, the broadcast share
hatched. Projected to the full-size checkpoint when the run was scaled, as the titles say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from studyctl.analysis.labels import describe_cell
from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.plot import Plot
from studyctl.analysis.plots.style import encode, facet_title, nodes_axis, panel_grid, plt, save
from studyctl.analysis.training.cells import display_axes
from studyctl.analysis.values import file_stem, missing

MAX_BARS = 24


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _projected(cells: pd.DataFrame) -> str:
    return " (projected to full size)" if bool(cells["projected"].any()) else ""


def _errorbar(ax: plt.Axes, x: Any, y: pd.Series, ci: pd.Series, style: dict[str, Any], **kw: Any) -> None:
    ax.errorbar(x, y * 100, yerr=ci.fillna(0) * 100, capsize=3, elinewidth=1.0, **style, **kw)


def overhead_vs_nodes(cells: pd.DataFrame, model: str, path: Path, axes: list[str]) -> Path:
    """Total waste (%) at the interval vs nodes, a line per series, 95% CI bars; dotted at Daly's interval."""
    data = cells[cells["model"].astype(str) == model]
    if kept(path, data, model, axes):
        return path
    enc = encode(data, [a for a in axes if a not in ("model", "nodes")])
    groups = enc.facet_groups(data)
    fig, grid = panel_grid(len(groups), 1, width=6.6, height=4.4)
    daly = data["total_waste_at_daly"].notna().any()
    for (facet, g), ax in zip(groups, grid[:, 0], strict=True):
        for key, s in enc.series(g, "nodes"):
            style = enc.style(key)
            _errorbar(ax, s["nodes"], s["total_waste"], s["total_waste_ci95"], style, linewidth=1.8)
            if daly:
                _errorbar(ax, s["nodes"] * 1.04, s["total_waste_at_daly"], s["total_waste_at_daly_ci95"],
                          {**style, "linestyle": (0, (1, 2))}, linewidth=1.0, alpha=0.8, markersize=4)
        nodes_axis(ax, data["nodes"])
        ax.set_ylim(bottom=0)
        ax.set_ylabel("total waste (% of wall time)")
        ax.set_title(facet_title(facet) if facet else "")
    interval = float(data["interval_s"].iloc[0])
    fig.suptitle(f"{model}: total waste at a {_duration(interval)} interval{_projected(data)}, 95% CI")
    handles, labels = enc.legend()
    if daly:
        handles.append(Line2D([], [], color="grey", linestyle=(0, (1, 2)), marker="."))
        labels.append("dotted: at Daly's interval")
    return save(fig, path, handles, labels, "mean over repetitions")


def restore_time(cells: pd.DataFrame, path: Path, axes: list[str]) -> Path:
    """The restore a failure needs per cell (95% CI), broadcast share hatched; one bar per cell."""
    data = cells[cells["failure_restore_s"].notna()]
    data = data.sort_values(axes, key=lambda c: c.astype(str)).head(MAX_BARS)
    if kept(path, data, axes):
        return path
    x = np.arange(len(data))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.0 * len(data) + 2.5), 4.8))
    total = data["failure_restore_s"]
    ax.bar(x, total, 0.7, yerr=data["failure_restore_s_ci95"].fillna(0), capsize=3, color="#9467bd",
           edgecolor="black", linewidth=0.4)
    bcast = np.minimum(data["broadcast_s"].fillna(0), total)
    ax.bar(x, bcast, 0.7, bottom=total - bcast, color="none", hatch="//", edgecolor="black", linewidth=0.4)
    ax.set_xticks(x)
    ax.set_xticklabels([describe_cell(r, [a for a in axes if not missing(r.get(a))]).replace(", ", "\n")
                        for r in data.to_dict("records")], fontsize=7.5)
    ax.set_ylabel("restore after a failure (s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Restore a failure needs, per cell{_projected(data)}, 95% CI")
    handles: list[Any] = []
    labels: list[str] = []
    if bool((bcast > 0).any()):
        handles, labels = [Patch(facecolor="none", edgecolor="black", hatch="//")], ["MPI_Bcast share"]
    return save(fig, path, handles, labels, None)


def training_plots(cells: pd.DataFrame, out_dir: Path) -> tuple[list[Plot], list[str]]:
    """The plots the cells (`training.cells.cost_cells`) support; the second list says which were skipped and why."""
    if cells.empty:
        return [], ["training cost plots: no measured checkpoint writes"]
    axes = display_axes(cells)
    made: list[Plot] = []
    skipped: list[str] = []
    for model in sorted(cells["model"].astype(str).unique()):
        made.append(Plot("overhead", f"Total waste vs nodes, one line per setting, 95% CI: {model}",
                         overhead_vs_nodes(cells, model, out_dir / f"overhead_{file_stem(model)}.png", axes)))
    if cells["failure_restore_s"].notna().any():
        made.append(Plot("restore_time", "Restore a failure needs, per cell (95% CI)",
                         restore_time(cells, out_dir / "restore_time.png", [a for a in axes if a != "model"]
                                      or ["model"])))
    else:
        skipped.append("restore after a failure: no restores measured")
    return made, skipped
