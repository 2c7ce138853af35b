"""Roofline-style plot, one per filesystem: each cell's bandwidth vs nodes under its shape's measured ceilings
(largest shard per rank, and the bytes spread evenly) and the filesystem's stated peak, so the gap is seen.

Each ceiling is drawn in a band of its 95% CI (from its probe's rounds). Cells are styled by `style.encode` like
the scaling plots; a ceiling takes a cell series' colour only where the
colour channel carries a shape setting (io_mode, ranks per node, block), else it is grey. Each point is labelled
with its share of its own shape's ceiling when a panel holds few series.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from studyctl.analysis.cells import DERIVED, HEADLINE, independent, varying
from studyctl.analysis.hardware.table import SIMULATED_CEILING
from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.plot import Plot
from studyctl.analysis.plots.scaling import simulated
from studyctl.analysis.plots.style import (
    MAX_FACETS,
    PHASE_TITLE,
    Encoding,
    encode,
    facet_title,
    nodes_axis,
    panel_grid,
    phases,
    save,
    style_key,
)
from studyctl.analysis.values import file_stem, missing

SHAPE_AXES = ("io_mode", "ranks_per_node", "block_mib")  # besides nodes and the filesystem
NOT_SERIES = ("nodes", "phase", "filesystem", *DERIVED)
GREY = "#666666"
LARGEST: dict[str, Any] = {"linestyle": "-", "linewidth": 6, "alpha": 0.3}
ROOF = 1.25  # a roof spans a node count ×/÷ this on the log₂ axis
EVEN: dict[str, Any] = {"linestyle": (0, (5, 3)), "linewidth": 1.4, "alpha": 0.8}
PEAK: dict[str, Any] = {"color": "#222222", "linestyle": "-.", "linewidth": 1.4}
BAND: dict[str, Any] = {"alpha": 0.15, "linewidth": 0}
MAX_LABELLED_SERIES = 4  # more share labels in one panel than this overlap


def _ceiling_colour(enc: Encoding, key: dict[str, Any]) -> str:
    for axis, (channel, styles) in enc.channels.items():
        if channel == "color" and axis in SHAPE_AXES:
            return str(styles.get(style_key(key.get(axis)), GREY))
    return GREY


def _ceilings(ax: Any, cells: pd.DataFrame, enc: Encoding) -> None:
    """Per shape series, a roof over each node count (thick: largest shard; dashed: even) in a band of its 95% CI
    (from the probe's rounds; none without), joined across node counts by a faint line: one node count still shows
    its roof."""
    have = cells.dropna(subset=["ceiling_GiBps"])
    series = [a for a in SHAPE_AXES if a in have]
    bounds = [c for c in ("ceiling_GiBps_low", "ceiling_GiBps_high") if c in have]
    for key, g in have.groupby(series, dropna=False, sort=True) if series else [((), have)]:
        values = dict(zip(series, key if isinstance(key, tuple) else (key,), strict=True))
        per_node = g.groupby("nodes")[["ceiling_GiBps", "even_ceiling_GiBps", *bounds]].first().sort_index()
        colour = _ceiling_colour(enc, values)
        for nodes, r in per_node.iterrows() if len(bounds) == 2 else ():
            if not (missing(r["ceiling_GiBps_low"]) or missing(r["ceiling_GiBps_high"])):
                ax.fill_between([nodes / ROOF, nodes * ROOF], r["ceiling_GiBps_low"], r["ceiling_GiBps_high"],
                                color=colour, **BAND)
        for column, style in (("ceiling_GiBps", LARGEST), ("even_ceiling_GiBps", EVEN)):
            ax.hlines(per_node[column], per_node.index / ROOF, per_node.index * ROOF, color=colour, **style)
            if len(per_node) > 1:
                ax.plot(per_node.index, per_node[column], color=colour, linewidth=1, alpha=0.3)


def _cells(ax: Any, data: pd.DataFrame, enc: Encoding) -> None:
    groups = enc.series(data, "nodes")
    for key, g in groups:
        style = enc.style(key)
        ci = g[f"{HEADLINE}_ci95"].fillna(0)
        ax.errorbar(g["nodes"], g[HEADLINE], yerr=[ci.clip(upper=g[HEADLINE]), ci], capsize=3, markersize=6,
                    linewidth=1.6, **style)
        if len(groups) <= MAX_LABELLED_SERIES:
            for x, y, s in zip(g["nodes"], g[HEADLINE], g["ceiling_share"], strict=True):
                if not missing(s):
                    ax.annotate(f"{s:.0%}", (x, y), textcoords="offset points", xytext=(6, -11), fontsize=8.5,
                                color=style["color"])


def _panel(ax: Any, data: pd.DataFrame, enc: Encoding, phase: str, peak: float | None, title: str) -> None:
    _ceilings(ax, data, enc)
    _cells(ax, data, enc)
    if peak:
        ax.axhline(peak, **PEAK)
    nodes_axis(ax, data["nodes"])
    ax.set_ylabel("GiB/s (total bytes / total time)")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10.5)


def _legend(enc: Encoding, peak: float | None) -> tuple[list[Any], list[str]]:
    legend = enc.legend()
    handles: list[Any] = list(legend[0])
    labels: list[str] = list(legend[1])
    handles += [Line2D([], [], color=GREY, **LARGEST), Line2D([], [], color=GREY, **EVEN)]
    labels += ["ceiling: every rank streams\nthe largest shard", "ceiling: the bytes spread\nevenly over ranks"]
    handles.append(Patch(color=GREY, **BAND))
    labels.append("the ceiling's 95% CI\n(the probe's rounds)")
    if peak:
        handles.append(Line2D([], [], **PEAK))
        labels.append(f"stated peak {peak:g} GiB/s")
    handles.append(Line2D([], [], color="none"))
    labels.append("labels: share of the\nshape's ceiling")
    return handles, labels


def roofline(summary: pd.DataFrame, filesystem: str, path: Path) -> Path:
    """Rows: facets; columns: phases. Returns the path written."""
    data = summary[(summary["filesystem"] == filesystem) & summary["shape"].notna()]
    if kept(path, data, filesystem):
        return path
    enc = encode(data, independent(data, varying(data, NOT_SERIES)))
    facets = enc.facet_groups(data)[:MAX_FACETS]
    cols = phases(data)
    peak = next((float(p) for p in data["peak_GiBps"] if not missing(p)), None)
    fig, axes = panel_grid(len(facets), len(cols))
    for row, (fvalues, fdata) in enumerate(facets):
        for col, phase in enumerate(cols):
            sub = fdata[fdata["phase"] == phase]
            if sub.empty:
                axes[row][col].set_visible(False)
                continue
            title = f"{filesystem}: {PHASE_TITLE[phase]}" + (f"\n{facet_title(fvalues)}" if fvalues else "")
            _panel(axes[row][col], sub, enc, phase, peak, title)
    if simulated(data) and data["nodes"].nunique() > 1:
        fig.text(0.01, -0.01, SIMULATED_CEILING + ".", ha="left", va="top", fontsize=9.5, color="#b35806")
    handles, labels = _legend(enc, peak)
    return save(fig, path, handles, labels, "mean ± 95% CI")


def roofline_plots(summary: pd.DataFrame, out_dir: Path) -> tuple[list[Plot], list[str]]:
    """One plot per filesystem with a ceiling or a stated peak; and why the study's other filesystems have none."""
    if summary.empty or "shape" not in summary or (summary["ceiling_GiBps"].isna().all()
                                                   and summary["peak_GiBps"].isna().all()):
        return [], []  # no ceilings and no peak in the whole study (`ceilings: off`): nothing to draw or explain
    made: list[Plot] = []
    skipped: list[str] = []
    for fs in sorted(summary["filesystem"].dropna().astype(str).unique()):
        data = summary[summary["filesystem"] == fs]
        if data["ceiling_GiBps"].isna().all() and data["peak_GiBps"].isna().all():
            skipped.append(f"roofline for {fs}: no ceiling measured and no stated peak_GiBps")
            continue
        title = f"{fs}: bandwidth per cell vs nodes against the measured ceilings and the stated peak"
        made.append(Plot("roofline", title, roofline(summary, fs, out_dir / f"roofline_{file_stem(fs)}.png")))
    return made, skipped
