"""Ratios with their 95% intervals, one row per matched cell: in-study `--ratio` and `compare`."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib import pyplot as plt
from matplotlib import ticker
from matplotlib.lines import Line2D

from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.style import COLOURS, labels_of, save

PHASE_COLOUR = {"write": COLOURS[0], "read": COLOURS[4]}


def forest(rows: pd.DataFrame, title: str, xlabel: str, path: Path, threshold: float | None = None,
           limit: int = 60) -> Path:
    """`rows`: label, phase, ratio, ratio_ci95_low, ratio_ci95_high, and optionally `highlight` (bool)."""
    rows = rows.head(limit).reset_index(drop=True)
    if kept(path, rows, title, xlabel, threshold):
        return path
    fig, ax = plt.subplots(figsize=(9.5, 1.2 + 0.34 * max(len(rows), 2)))
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows.itertuples(), strict=True):
        colour = "#d62728" if getattr(r, "highlight", False) else PHASE_COLOUR.get(r.phase, "#333333")
        if not math.isnan(r.ratio_ci95_low):
            ax.plot([r.ratio_ci95_low, r.ratio_ci95_high], [y, y], color=colour, linewidth=2, alpha=0.7)
        ax.plot([r.ratio], [y], marker="o" if r.phase == "write" else "s", color=colour, markersize=7)
        right = r.ratio if math.isnan(r.ratio_ci95_high) else r.ratio_ci95_high
        ax.annotate(f" {r.ratio:.2f}×", (right, y), va="center", fontsize=8, color=colour)
    ax.axvline(1.0, color="grey", linewidth=1)
    values = [*rows["ratio"], *rows["ratio_ci95_low"].dropna(), *rows["ratio_ci95_high"].dropna(), 1.0,
              *([1 - threshold] if threshold is not None else [])]
    ax.set_xscale("log", base=2)  # ratios multiply: 2× and 0.5× are as far from 1
    ax.set_xlim(min(values) / 1.15, max(values) * 1.35)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.2g}×"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    if threshold is not None:
        ax.axvline(1 - threshold, color="#d62728", linestyle=(0, (4, 2)), linewidth=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r.label} · {r.phase}" for r in rows.itertuples()], fontsize=8.5)
    ax.set_xlabel(f"{xlabel} (log₂ scale)")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [Line2D([], [], color=PHASE_COLOUR["write"], marker="o", label="write"),
               Line2D([], [], color=PHASE_COLOUR["read"], marker="s", label="read")]
    if threshold is not None:
        handles += [Line2D([], [], color="#d62728", marker="o", linestyle="", label="regressed"),
                    Line2D([], [], color="#d62728", linestyle=(0, (4, 2)), label=f"threshold {1 - threshold:.0%}")]
    return save(fig, path, handles, labels_of(handles), "ratio, 95% CI")
