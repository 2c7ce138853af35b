"""Scaling plots (matplotlib Agg, PNG): functions of the summary and ranks tables alone.

One palette, one source (`palette`): colour = filesystem, marker = ZeRO stage, line style = I/O mode,
in every plot of a study; I/O-mode bars and study overlays take their colours from here too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

from studyctl.units import GIB, format_bytes

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib import ticker
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
MARKERS = {0: "s", 1: "o", 2: "^", 3: "D"}
LINESTYLES = {"buffered": "-", "direct": "--", "hybrid": ":"}
IO_MODE_COLOURS = {"buffered": "#9467bd", "direct": "#ff7f0e", "hybrid": "#17becf"}
IO_MODE_HATCH = {"buffered": "", "direct": "//", "hybrid": ".."}
STUDY_COLOURS = ("#1f77b4", "#d62728")  # compare: study A, study B
IDEAL = {"color": "grey", "alpha": 0.6, "linestyle": (0, (1, 2)), "linewidth": 1.3}
PHASE_TITLE = {"write": "checkpoint write", "read": "restore (cold read)"}
DPI = 110
plt.rcParams.update({"font.size": 10.5, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9.5,
                     "axes.spines.top": False, "axes.spines.right": False})


@dataclass
class Palette:
    """Stable styles for a study: filesystems get colours in sorted-name order."""

    colour: dict[str, str] = field(default_factory=dict)

    def style(self, filesystem: str, zero: Any, io_mode: str) -> dict[str, Any]:
        zero_i = int(zero) if not _missing(zero) else -1
        return {"color": self.colour.get(str(filesystem), "black"), "marker": MARKERS.get(zero_i, "x"),
                "linestyle": LINESTYLES.get(str(io_mode), "-.")}


def palette(filesystems: Sequence[str]) -> Palette:
    """The one palette function: every plot (and compare's overlay) styles series through it."""
    names = sorted({str(f) for f in filesystems})
    return Palette({fs: COLOURS[i % len(COLOURS)] for i, fs in enumerate(names)})


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


SERIES_KEYS = ["filesystem", "zero_stage", "io_mode", "tensor_parallel", "pipeline_parallel",
               "ranks_per_node", "scale", "block_bytes", "strategy", "restore_mode", "tool"]
SHORT = {"filesystem": "", "zero_stage": "ZeRO-", "io_mode": "", "tensor_parallel": "TP",
         "pipeline_parallel": "PP", "ranks_per_node": "rpn ", "scale": "scale ", "block_bytes": "block ",
         "strategy": "", "restore_mode": "restore ", "tool": ""}


def _series(summary: pd.DataFrame) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    keys = [k for k in SERIES_KEYS if k in summary.columns]
    return [(dict(zip(keys, k, strict=True)), g.sort_values("nodes"))
            for k, g in summary.groupby(keys, dropna=False, sort=True)]


def _label(key: dict[str, Any], varying: set[str]) -> str:
    """Filesystem, ZeRO and I/O mode always; the rest only when it varies in the plot."""
    parts = []
    for name, value in key.items():
        if name not in varying and name not in ("filesystem", "zero_stage", "io_mode"):
            continue
        if name == "block_bytes":
            value = f"{int(value) >> 20}MiB"
        if name == "tool" and value == "dlio":
            value = "(DLIO)"
        parts.append(f"{SHORT[name]}{value}")
    return " ".join(parts)


def _varying(frame: pd.DataFrame) -> set[str]:
    return {c for c in SERIES_KEYS if c in frame.columns and frame[c].nunique(dropna=False) > 1}


def _save(fig: plt.Figure, path: Path, handles: Sequence[Any] = (), labels: Sequence[str] = (),
          title: str | None = None) -> Path:
    """Legend outside the data on the right, tight layout, atomic write."""
    if handles:
        fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.93), frameon=False, title=title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=DPI, bbox_inches="tight", facecolor="white")
    plt.close(fig)
    tmp.replace(path)
    return path


def nodes_axis(ax: plt.Axes, nodes: Sequence[Any]) -> None:
    """log2 x-axis with a tick at every node count measured."""
    ticks = sorted({int(n) for n in nodes})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("nodes (log₂ scale)")
    ax.grid(True, which="major", alpha=0.3)
    lo, hi = ticks[0], ticks[-1]
    ax.set_xlim(lo / 1.4, hi * 1.4)


def _phases(data: pd.DataFrame) -> list[str]:
    return [p for p in ("write", "read") if p in set(data["phase"])]


def bandwidth_vs_nodes(summary: pd.DataFrame, model: str, pal: Palette, path: Path) -> Path:
    """Aggregate GiB/s vs nodes, write and read side by side, 95% CI bars, ideal scaling dotted."""
    data = summary[summary["model"] == model]
    phases = _phases(data)
    fig, axes = plt.subplots(1, len(phases), figsize=(6.0 * len(phases), 4.6), squeeze=False)
    varying = _varying(data)
    multi_nodes = data["nodes"].nunique() > 1
    for ax, phase in zip(axes[0], phases, strict=True):
        for key, g in _series(data[data["phase"] == phase]):
            style = pal.style(key["filesystem"], key["zero_stage"], key["io_mode"])
            ax.errorbar(g["nodes"], g["aggregate_GiBps_mean"], yerr=g["aggregate_GiBps_ci95"].fillna(0),
                        capsize=3, markersize=6, linewidth=1.8, label=_label(key, varying), **style)
            if len(g) > 1:
                base = g.iloc[0]
                ideal = base["aggregate_GiBps_mean"] * g["nodes"] / base["nodes"]
                ax.plot(g["nodes"], ideal, **{**IDEAL, "color": style["color"]})
        nodes_axis(ax, data["nodes"])
        ax.set_ylabel("aggregate bandwidth (GiB/s)")
        if multi_nodes:  # log-log: ideal scaling is a straight line, deviations read as ratios
            ax.set_yscale("log", base=2)
            means = data.loc[data["phase"] == phase, "aggregate_GiBps_mean"]
            means = means[means > 0]
            if len(means):  # limits from the means (and ideal lines): wide CIs may run off the axis
                top_ideal = max((line.get_ydata().max() for line in ax.get_lines() if len(line.get_ydata())),
                                default=means.max())
                lo, hi = means.min() / 1.6, max(means.max(), float(top_ideal)) * 1.4
                ax.set_ylim(lo, hi)
                octaves = math.log2(hi / lo)
                subs = (1.0, 1.25, 1.5, 1.75) if octaves < 2.5 else (1.0, 1.5) if octaves < 5 else (1.0,)
                ax.yaxis.set_major_locator(ticker.LogLocator(base=2, subs=subs))
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
            ax.set_ylabel("aggregate bandwidth (GiB/s, log₂ scale)")
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(f"{model}: {PHASE_TITLE[phase]}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if multi_nodes:
        handles.append(Line2D([], [], **IDEAL))
        labels.append("ideal scaling")
    return _save(fig, path, handles, labels, "mean ± 95% CI")


def duration_vs_nodes(summary: pd.DataFrame, model: str, pal: Palette, path: Path) -> Path:
    """Time to checkpoint (slowest rank) vs nodes: what training waits for."""
    data = summary[(summary["model"] == model) & (summary["phase"] == "write")]
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    varying = _varying(data)
    for key, g in _series(data):
        ax.errorbar(g["nodes"], g["duration_s_mean"], yerr=g["duration_s_ci95"].fillna(0), capsize=3,
                    markersize=6, linewidth=1.8, label=_label(key, varying),
                    **pal.style(key["filesystem"], key["zero_stage"], key["io_mode"]))
    nodes_axis(ax, data["nodes"])
    ax.set_ylabel("time to checkpoint, slowest rank (s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{model}: time to checkpoint ({_size(data['bytes'])})")
    handles, labels = ax.get_legend_handles_labels()
    return _save(fig, path, handles, labels, "mean ± 95% CI")


def _size(values: pd.Series) -> str:
    sizes = sorted({int(v) for v in values})
    text = [format_bytes(s, 2 if s >= GIB else 0) for s in sizes]
    return text[0] if text[0] == text[-1] else f"{text[0]}–{text[-1]}"


def efficiency(summary: pd.DataFrame, model: str, pal: Palette, path: Path) -> Path:
    """Per-node bandwidth relative to the series' smallest node count; 100% = perfect scaling."""
    data = summary[summary["model"] == model]
    phases = _phases(data)
    fig, axes = plt.subplots(1, len(phases), figsize=(6.0 * len(phases), 4.6), squeeze=False)
    varying = _varying(data)
    top = 110.0
    for ax, phase in zip(axes[0], phases, strict=True):
        for key, g in _series(data[data["phase"] == phase]):
            ax.plot(g["nodes"], g["scaling_efficiency"] * 100, markersize=6, linewidth=1.8,
                    label=_label(key, varying),
                    **pal.style(key["filesystem"], key["zero_stage"], key["io_mode"]))
            top = max(top, float((g["scaling_efficiency"] * 100).max()) * 1.08)
        ax.axhline(100, **IDEAL)
        nodes_axis(ax, data["nodes"])
        ax.set_ylabel("scaling efficiency (%)")
        ax.set_ylim(0, top)
        ax.set_title(f"{model}: {PHASE_TITLE[phase]}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles.append(Line2D([], [], **IDEAL))
    labels.append("perfect scaling")
    return _save(fig, path, handles, labels, "per-node GiB/s vs fewest nodes")


def rank_spread(ranks: pd.DataFrame, pal: Palette, path: Path,
                limit: int = 32) -> tuple[Path | None, str | None]:
    """Per-rank write bandwidth, one box (and its ranks as dots) per point: low outliers are stragglers.

    With more points than fit, the largest node counts (most ranks, where stragglers hurt) come first.
    """
    data = ranks[ranks["phase"] == "write"]
    if data.empty:
        return None, "per-rank spread: no per-rank write data"
    points = data.groupby("point_id", sort=False).first()
    order = points.sort_values(["nodes", "model", "zero_stage", "io_mode", "filesystem", "repetition"],
                               ascending=[False, True, True, True, True, True]).head(limit)
    order = order.sort_values(["model", "nodes", "zero_stage", "io_mode", "filesystem", "repetition"])
    fig, ax = plt.subplots(figsize=(max(7.0, 0.42 * len(order) + 2.5), 5.0))
    by_point = dict(tuple(data.groupby("point_id", sort=False)["bandwidth_GiBps"]))
    values = [by_point[pid].to_numpy() for pid in order.index]
    box = ax.boxplot(values, patch_artist=True, widths=0.6, showfliers=False)
    for i, (patch, (_, row)) in enumerate(zip(box["boxes"], order.iterrows(), strict=True)):
        colour = pal.colour.get(str(row["filesystem"]), "grey")
        patch.set_facecolor(colour)
        patch.set_alpha(0.35)
        vals = values[i]
        jitter = [((j * 0.618) % 1 - 0.5) * 0.35 for j in range(len(vals))]
        ax.scatter([i + 1 + x for x in jitter], vals, s=9, color=colour, alpha=0.8, zorder=3, linewidths=0)
    for median in box["medians"]:
        median.set_color("black")
    ax.set_xticks(range(1, len(order) + 1))
    ax.set_xticklabels([f"{r.model} Z{r.zero_stage} {r.nodes}n {r.io_mode[:3]} r{r.repetition}"
                        for r in order.itertuples()], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("per-rank write bandwidth (GiB/s)")
    ax.set_ylim(bottom=0)
    shown = (f" ({len(order)} of {len(points)} points, largest node counts)"
             if len(points) > len(order) else "")
    ax.set_title(f"Per-rank write bandwidth, all checkpoints{shown}")
    handles = [Patch(facecolor=c, alpha=0.5, label=fs) for fs, c in pal.colour.items()]
    return _save(fig, path, handles, [h.get_label() for h in handles], "filesystem"), None


def io_mode_comparison(summary: pd.DataFrame, path: Path, limit: int = 16) -> tuple[Path | None, str | None]:
    """Bars per I/O mode at each (model, ZeRO, filesystem)'s largest node count: the claim at scale."""
    modes = [m for m in ("buffered", "direct", "hybrid") if m in set(summary["io_mode"])]
    if len(modes) < 2:
        return None, "I/O mode comparison: the study has one I/O mode"
    group_cols = ["model", "zero_stage", "filesystem"]
    largest = summary.groupby(group_cols, dropna=False)["nodes"].transform("max")
    data = summary[summary["nodes"] == largest]
    phases = _phases(data)
    n_groups = min(limit, len(data.groupby(group_cols)))
    width = min(16.0, max(6.5, 0.55 * n_groups * len(modes) + 2.0))
    fig, axes = plt.subplots(len(phases), 1, figsize=(width, 3.6 * len(phases) + 0.8), squeeze=False)
    for ax, phase in zip(axes[:, 0], phases, strict=True):
        table = data[data["phase"] == phase].pivot_table(
            index=[*group_cols, "nodes"], columns="io_mode",
            values=["aggregate_GiBps_mean", "aggregate_GiBps_ci95"], aggfunc="mean").head(limit)
        bar = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            if mode not in table["aggregate_GiBps_mean"]:
                continue
            means = table["aggregate_GiBps_mean"][mode]
            cis = table["aggregate_GiBps_ci95"]
            errs = cis[mode].fillna(0) if mode in cis else 0
            xs = [j + (i - (len(modes) - 1) / 2) * bar for j in range(len(table))]
            ax.bar(xs, means.to_numpy(), bar, yerr=errs, capsize=2, label=mode, color=IO_MODE_COLOURS[mode],
                   alpha=0.85, hatch=IO_MODE_HATCH[mode], edgecolor="black", linewidth=0.4)
        ax.set_xticks(range(len(table)))
        ax.set_xticklabels([f"{m}\nZeRO-{z} {fs}\n{n} nodes" for m, z, fs, n in table.index], fontsize=8.5)
        ax.set_ylabel("aggregate bandwidth (GiB/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"I/O mode: {PHASE_TITLE[phase]}, at the largest node count")
    handles, labels = axes[0][0].get_legend_handles_labels()
    return _save(fig, path, handles, labels, "I/O mode (mean ± 95% CI)"), None


def make_plots(summary: pd.DataFrame, ranks: pd.DataFrame, out_dir: Path) -> tuple[list[Path], list[str]]:
    """Every plot the data supports; the second list says which were skipped and why."""
    if summary.empty:
        return [], ["all plots: no completed results yet, nothing to plot"]
    pal = palette(summary["filesystem"].astype(str).tolist())
    made: list[Path] = []
    skipped: list[str] = []
    for model in sorted(summary["model"].astype(str).unique()):
        safe = model.replace("/", "_").replace(" ", "_")
        data = summary[summary["model"] == model]
        made.append(bandwidth_vs_nodes(summary, model, pal, out_dir / f"bandwidth_{safe}.png"))
        if "write" in set(data["phase"]):
            made.append(duration_vs_nodes(summary, model, pal, out_dir / f"duration_{safe}.png"))
        else:
            skipped.append(f"time to checkpoint for {model}: no write phase")
        if data["nodes"].nunique() > 1:
            made.append(efficiency(summary, model, pal, out_dir / f"efficiency_{safe}.png"))
        else:
            only = int(data["nodes"].iloc[0])
            skipped.append(f"scaling efficiency for {model}: a single node count ({only})")
    for plot, reason in (rank_spread(ranks, pal, out_dir / "rank_spread.png") if not ranks.empty
                         else (None, "per-rank spread: no per-rank data"),
                         io_mode_comparison(summary, out_dir / "io_mode.png")):
        if plot is not None:
            made.append(plot)
        else:
            skipped.append(str(reason))
    return made, skipped


def compare_overlay(matched: pd.DataFrame, name_a: str, name_b: str, threshold: float, path: Path) -> Path:
    """Top: A and B bandwidth vs nodes on the matched cells. Bottom: B/A with 95% CI and the threshold."""
    phases = _phases(matched)
    fig, axes = plt.subplots(2, len(phases), figsize=(6.2 * len(phases), 8.2), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2]})
    series = [k for k in ("model", "zero_stage", "io_mode", "filesystem", "tensor_parallel",
                          "pipeline_parallel", "ranks_per_node") if k in matched.columns]
    for col, phase in enumerate(phases):
        top, bottom = axes[0][col], axes[1][col]
        data = matched[matched["phase"] == phase]
        groups = list(data.groupby(series, dropna=False, sort=True))
        for i, (key, g) in enumerate(groups):
            g = g.sort_values("nodes")
            shift = 2 ** ((i - (len(groups) - 1) / 2) * 0.05)  # ratio panel: side by side, not on top
            xs = g["nodes"] * shift
            marker = MARKERS.get(int(key[1]), "x")
            for side, colour, ls in (("a", STUDY_COLOURS[0], "-"), ("b", STUDY_COLOURS[1], "--")):
                top.errorbar(g["nodes"], g[f"GiBps_{side}"], yerr=g[f"ci95_{side}"].fillna(0), color=colour,
                             linestyle=ls, marker=marker, capsize=3, markersize=5, linewidth=1.5)
            colours = ["#d62728" if r else "#333333" for r in g["regressed"]]
            low = (g["ratio"] - g["ratio_ci95_low"]).fillna(0).clip(lower=0)
            high = (g["ratio_ci95_high"] - g["ratio"]).fillna(0).clip(lower=0)
            bottom.errorbar(xs, g["ratio"], yerr=[low, high], fmt="none", ecolor="#777777", capsize=3)
            bottom.scatter(xs, g["ratio"], c=colours, marker=marker, s=36, zorder=3)
        nodes_axis(top, data["nodes"])
        top.set_ylabel("aggregate bandwidth (GiB/s)")
        top.set_ylim(bottom=0)
        top.set_title(f"{name_b} vs {name_a}: {PHASE_TITLE[phase]}")
        bottom.axhline(1.0, color="grey", linewidth=1)
        bottom.axhspan(0, 1 - threshold, color="#d62728", alpha=0.07)
        bottom.axhline(1 - threshold, color="#d62728", linestyle=(0, (4, 2)), linewidth=1)
        nodes_axis(bottom, data["nodes"])
        bottom.set_ylabel(f"ratio {name_b} / {name_a}")
        lo = float(min(data["ratio_ci95_low"].min(skipna=True), data["ratio"].min(), 1 - threshold))
        hi = float(max(data["ratio_ci95_high"].max(skipna=True), data["ratio"].max(), 1.0))
        lo, hi = (lo if lo == lo else 0.5), (hi if hi == hi else 1.5)
        bottom.set_ylim(max(0.0, lo - 0.05), hi + 0.05)
    zeros = sorted({int(z) for z in matched["zero_stage"]})
    handles = [Line2D([], [], color=STUDY_COLOURS[0], linestyle="-", label=f"A: {name_a}"),
               Line2D([], [], color=STUDY_COLOURS[1], linestyle="--", label=f"B: {name_b}")]
    handles += [Line2D([], [], color="#333333", marker=MARKERS.get(z, "x"), linestyle="", label=f"ZeRO-{z}")
                for z in zeros]
    handles += [Line2D([], [], color="#d62728", marker="o", linestyle="", label="regressed"),
                Line2D([], [], color="#d62728", linestyle=(0, (4, 2)),
                       label=f"threshold {1 - threshold:.0%}")]
    return _save(fig, path, handles, [h.get_label() for h in handles], "mean ± 95% CI")
