"""Scaling plots, one model per file: bandwidth, time to checkpoint and scaling efficiency vs nodes.

Series are keyed by every axis that varies (except nodes), each on its own channel (see `style`);
facet rows when they do not fit. The ideal-scaling line is drawn only for series whose number of
ranks moving bytes grows with nodes; with a fixed writer count (ZeRO-0) the ideal is flat, not linear.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.lines import Line2D

from studyctl.analysis.cells import DERIVED, HEADLINE, independent, varying
from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.style import (
    IDEAL,
    MAX_FACETS,
    PHASE_TITLE,
    encode,
    facet_title,
    flagged_hollow,
    nodes_axis,
    panel_grid,
    phases,
    save,
)
from studyctl.units import GIB, format_bytes


@dataclass(frozen=True)
class Measure:
    """What a scaling plot draws on y."""

    column: str
    ci: str | None
    ylabel: str
    legend_title: str
    ideal: bool = False
    percent: bool = False


BANDWIDTH = Measure(HEADLINE, f"{HEADLINE}_ci95", "total bytes / total time (GiB/s)", "mean ± 95% CI", ideal=True)
DURATION = Measure("duration_s_mean", "duration_s_ci95", "time to checkpoint, slowest rank (s)", "mean ± 95% CI")
EFFICIENCY = Measure("scaling_efficiency", None, "measured / ideal (%)", "vs the fewest nodes", percent=True)

NOT_SERIES = ("nodes", "model", "phase", *DERIVED)


def _draw_series(ax: Any, key: dict[str, Any], g: pd.DataFrame, enc: Any, m: Measure) -> bool:
    """One series; True if it carries an ideal line."""
    style = enc.style(key)
    scale = 100.0 if m.percent else 1.0
    ys = g[m.column] * scale
    # the interval below a value stops at 0: a bandwidth or a time is never negative
    yerr = [g[m.ci].fillna(0).clip(upper=ys), g[m.ci].fillna(0)] if m.ci else None
    hollow = any(flagged_hollow(f) for f in g.get("flags", []))
    ax.errorbar(g["nodes"], ys, yerr=yerr, capsize=3, markersize=6, linewidth=1.8,
                markerfacecolor="white" if hollow else style["color"], **style)
    grows = bool(g["active_ranks"].max() > g["active_ranks"].min()) if "active_ranks" in g else False
    if m.ideal and grows and len(g) > 1:
        ax.plot(g["nodes"], g["ideal_GiBps"], **{**IDEAL, "color": style["color"]})
    return grows


def _panel(ax: Any, data: pd.DataFrame, enc: Any, m: Measure, title: str) -> tuple[bool, bool]:
    ideal_drawn = fixed = False
    for key, g in enc.series(data, "nodes"):
        grows = _draw_series(ax, key, g, enc, m)
        ideal_drawn |= grows and m.ideal and len(g) > 1
        fixed |= (not grows) and len(g) > 1
    nodes_axis(ax, data["nodes"])
    ax.set_ylabel(m.ylabel)
    ax.set_ylim(bottom=0)
    if m.percent:
        ax.axhline(100, **IDEAL)
    ax.set_title(title, fontsize=10.5)
    return ideal_drawn, fixed


def scaling_plot(summary: pd.DataFrame, model: str, m: Measure, path: Any, only_phase: str | None = None) -> Any:
    """Rows: facets; columns: phases. Returns the path written."""
    data = summary[summary["model"] == model]
    if only_phase:
        data = data[data["phase"] == only_phase]
    if kept(path, data, model, m):
        return path
    enc = encode(data, independent(data, varying(data, NOT_SERIES)))
    facets = enc.facet_groups(data)[:MAX_FACETS]
    cols = phases(data)
    fig, axes = panel_grid(len(facets), len(cols))
    ideal_drawn = fixed = False
    for row, (fvalues, fdata) in enumerate(facets):
        for col, phase in enumerate(cols):
            sub = fdata[fdata["phase"] == phase]
            title = f"{model}: {PHASE_TITLE[phase]}" + (f"\n{facet_title(fvalues)}" if fvalues else "")
            if sub.empty:
                axes[row][col].set_visible(False)
                continue
            drawn, flat = _panel(axes[row][col], sub, enc, m, title)
            ideal_drawn, fixed = ideal_drawn or drawn, fixed or flat
    handles, labels = enc.legend()
    if ideal_drawn or m.percent:
        handles.append(Line2D([], [], **IDEAL))
        labels.append("ideal: 100% (∝ ranks moving bytes)" if m.percent else "ideal: ∝ ranks moving bytes")
    if m.ideal and fixed:
        handles.append(Line2D([], [], color="none"))
        labels.append("no ideal line: ranks moving\nbytes fixed (e.g. ZeRO-0)")
    if any(flagged_hollow(f) for f in data.get("flags", [])):
        handles.append(Line2D([], [], color="#333333", marker="o", markerfacecolor="white", linestyle=""))
        labels.append("hollow: not a cold read\n(warm, memory or DLIO)")
    if simulated(data) and (ideal_drawn or m.percent):
        fig.text(0.01, -0.01, SIMULATED_CAVEAT, ha="left", va="top", fontsize=9.5, color="#b35806", wrap=True)
    return save(fig, path, handles, labels, m.legend_title)


SIMULATED_CAVEAT = ("Simulated nodes: every \"node\" ran on one machine with one disk, so the ideal line and the "
                    "efficiency are not what nodes would scale to;\nthey show how one machine shares its disk and "
                    "cores, not how storage scales across nodes.")


def simulated(data: pd.DataFrame) -> bool:
    """Any cell measured on simulated nodes (provenance.simulated_nodes: one machine standing in for several)."""
    return bool(data["simulated_nodes"].fillna(False).astype(bool).any()) if "simulated_nodes" in data else False


def checkpoint_size(values: pd.Series) -> str:
    sizes = sorted({int(v) for v in values})
    text = [format_bytes(s, 2 if s >= GIB else 0) for s in sizes]
    return text[0] if text[0] == text[-1] else f"{text[0]}–{text[-1]}"
