"""Scaling plots (matplotlib, PNG): functions of the summary/ranks tables alone.

One palette: colour = filesystem, marker = ZeRO stage, line style = I/O mode, everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
MARKERS = {0: "s", 1: "o", 2: "^", 3: "D"}
LINESTYLES = {"buffered": "-", "direct": "--", "hybrid": ":"}
PHASE_TITLE = {"write": "checkpoint write", "read": "restore (cold read)"}
DPI = 110


class Palette:
    """Stable colours per filesystem (sorted names), so every plot of a study agrees."""

    def __init__(self, filesystems: Sequence[str]) -> None:
        self.colour = {fs: COLOURS[i % len(COLOURS)] for i, fs in enumerate(sorted(set(filesystems)))}

    def style(self, filesystem: str, zero: int, io_mode: str) -> dict:
        return {"color": self.colour.get(filesystem, "black"), "marker": MARKERS.get(int(zero), "x"),
                "linestyle": LINESTYLES.get(io_mode, "-.")}


def _series(summary: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    keys = ["filesystem", "zero_stage", "io_mode", "tensor_parallel", "pipeline_parallel", "ranks_per_node",
            "scale", "block_bytes", "tool"]
    keys = [k for k in keys if k in summary.columns]
    return [(k if isinstance(k, tuple) else (k,), g.sort_values("nodes"))
            for k, g in summary.groupby(keys, dropna=False, sort=True)]


def _label(key: tuple, varying: dict[str, bool]) -> str:
    names = ["filesystem", "zero_stage", "io_mode", "tensor_parallel", "pipeline_parallel", "ranks_per_node", "scale",
             "block_bytes", "tool"]
    parts = []
    for name, value in zip(names, key, strict=False):
        if not varying.get(name, False) and name not in ("filesystem", "zero_stage"):
            continue
        short = {"filesystem": "", "zero_stage": "ZeRO-", "io_mode": "", "tensor_parallel": "TP",
                 "pipeline_parallel": "PP", "ranks_per_node": "rpn ", "scale": "scale ", "block_bytes": "block ",
                 "tool": ""}[name]
        if name == "block_bytes":
            value = f"{int(value) >> 20}MiB"
        parts.append(f"{short}{value}")
    return " ".join(parts)


def _varying(frame: pd.DataFrame) -> dict[str, bool]:
    return {c: frame[c].nunique(dropna=False) > 1 for c in frame.columns}


def _finish(fig: plt.Figure, axes: Sequence[plt.Axes], path: Path) -> Path:
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path


def _nodes_axis(ax: plt.Axes, nodes: Sequence[int]) -> None:
    ticks = sorted(set(int(n) for n in nodes))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("nodes")
    ax.grid(True, which="major", alpha=0.3)
    if len(ticks) == 1:
        ax.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)


def bandwidth_vs_nodes(summary: pd.DataFrame, model: str, palette: Palette, path: Path) -> Path:
    """Aggregate GiB/s vs nodes, write and read side by side, 95% CI bars, ideal scaling dashed."""
    data = summary[summary["model"] == model]
    phases = [p for p in ("write", "read") if p in set(data["phase"])]
    fig, axes = plt.subplots(1, len(phases), figsize=(6.2 * len(phases), 4.4), squeeze=False)
    varying = _varying(data)
    for ax, phase in zip(axes[0], phases, strict=True):
        for key, g in _series(data[data["phase"] == phase]):
            fs, zero, io_mode = key[0], key[1], key[2]
            style = palette.style(fs, zero, io_mode)
            err = g["aggregate_GiBps_ci95"].fillna(0)
            ax.errorbar(g["nodes"], g["aggregate_GiBps_mean"], yerr=err, capsize=3, label=_label(key, varying),
                        markersize=6, **style)
            base = g.iloc[0]
            ideal = base["aggregate_GiBps_mean"] * g["nodes"] / base["nodes"]
            if len(g) > 1:
                ax.plot(g["nodes"], ideal, color=style["color"], alpha=0.35, linestyle=(0, (1, 3)), linewidth=1.2)
        _nodes_axis(ax, data["nodes"])
        ax.set_ylabel("aggregate bandwidth (GiB/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{model}: {PHASE_TITLE[phase]}")
    axes[0][0].plot([], [], color="grey", alpha=0.5, linestyle=(0, (1, 3)), label="ideal scaling")
    return _finish(fig, axes[0], path)


def duration_vs_nodes(summary: pd.DataFrame, model: str, palette: Palette, path: Path) -> Path:
    data = summary[(summary["model"] == model) & (summary["phase"] == "write")]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    varying = _varying(data)
    for key, g in _series(data):
        ax.errorbar(g["nodes"], g["duration_s_mean"], yerr=g["duration_s_ci95"].fillna(0), capsize=3,
                    label=_label(key, varying), **palette.style(key[0], key[1], key[2]))
    _nodes_axis(ax, data["nodes"])
    ax.set_ylabel("time to checkpoint, slowest rank (s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{model}: time to checkpoint")
    return _finish(fig, [ax], path)


def efficiency(summary: pd.DataFrame, palette: Palette, path: Path) -> Path:
    phases = [p for p in ("write", "read") if p in set(summary["phase"])]
    fig, axes = plt.subplots(1, len(phases), figsize=(6.2 * len(phases), 4.4), squeeze=False)
    varying = _varying(summary)
    for ax, phase in zip(axes[0], phases, strict=True):
        models = sorted(summary["model"].unique())
        for (model, key), g in (((m, k), gg) for m, mg in summary[summary["phase"] == phase].groupby("model")
                                for k, gg in _series(mg)):
            style = palette.style(key[0], key[1], key[2])
            if len(palette.colour) == 1:  # one filesystem: let colour tell the models apart
                style["color"] = COLOURS[models.index(model) % len(COLOURS)]
            ax.plot(g["nodes"], g["scaling_efficiency"] * 100, label=f"{model} {_label(key, varying)}", **style)
        ax.axhline(100, color="grey", alpha=0.5, linestyle=(0, (1, 3)))
        _nodes_axis(ax, summary["nodes"])
        ax.set_ylabel("scaling efficiency (%)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"per-node bandwidth vs the smallest node count: {PHASE_TITLE[phase]}", fontsize=11)
    return _finish(fig, axes[0], path)


def rank_spread(ranks: pd.DataFrame, palette: Palette, path: Path, limit: int = 24) -> Path | None:
    """Per-rank write bandwidth per point: wide boxes and low whiskers are stragglers."""
    data = ranks[ranks["phase"] == "write"]
    if data.empty:
        return None
    order = data.groupby("point_id", sort=False).first().sort_values(["model", "nodes", "zero_stage"]).head(limit)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(order) + 2), 4.6))
    values = [data.loc[data["point_id"] == pid, "bandwidth_GiBps"].to_numpy() for pid in order.index]
    box = ax.boxplot(values, patch_artist=True, widths=0.6)
    for patch, (_, row) in zip(box["boxes"], order.iterrows(), strict=True):
        patch.set_facecolor(palette.colour.get(row["filesystem"], "grey"))
        patch.set_alpha(0.55)
    ax.set_xticks(range(1, len(order) + 1))
    ax.set_xticklabels([f"{r.model} Z{r.zero_stage} {r.nodes}n {r.io_mode[:3]}" for r in order.itertuples()],
                       rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("per-rank write bandwidth (GiB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("per-rank bandwidth spread (stragglers)")
    for fs, colour in palette.colour.items():
        ax.bar([0], [0], color=colour, alpha=0.55, label=fs)
    return _finish(fig, [ax], path)


def io_mode_comparison(summary: pd.DataFrame, palette: Palette, path: Path) -> Path | None:
    modes = [m for m in ("buffered", "direct", "hybrid") if m in set(summary["io_mode"])]
    if len(modes) < 2:
        return None
    phases = [p for p in ("write", "read") if p in set(summary["phase"])]
    fig, axes = plt.subplots(1, len(phases), figsize=(6.4 * len(phases), 4.6), squeeze=False)
    group_cols = ["model", "zero_stage", "nodes", "filesystem"]
    for ax, phase in zip(axes[0], phases, strict=True):
        data = summary[summary["phase"] == phase]
        groups = sorted(data.groupby(group_cols).groups)
        width = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            means, errs = [], []
            for g in groups:
                sel = data[(data[group_cols].apply(tuple, axis=1) == g) & (data["io_mode"] == mode)]
                means.append(sel["aggregate_GiBps_mean"].mean() if len(sel) else math.nan)
                errs.append(sel["aggregate_GiBps_ci95"].fillna(0).mean() if len(sel) else 0)
            xs = [j + (i - (len(modes) - 1) / 2) * width for j in range(len(groups))]
            ax.bar(xs, means, width, yerr=errs, capsize=2, label=mode, color=COLOURS[i + 3], alpha=0.85,
                   hatch={"buffered": "", "direct": "//", "hybrid": ".."}[mode], edgecolor="black", linewidth=0.4)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{m} Z{z} {n}n {fs}" for m, z, n, fs in groups], rotation=50, ha="right", fontsize=8)
        ax.set_ylabel("aggregate bandwidth (GiB/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"I/O mode: {PHASE_TITLE[phase]}")
    return _finish(fig, axes[0], path)


def make_plots(summary: pd.DataFrame, ranks: pd.DataFrame, out_dir: Path) -> tuple[list[Path], list[str]]:
    """Every plot the data supports; the second list says which were skipped and why."""
    if summary.empty:
        return [], ["no completed results: nothing to plot"]
    palette = Palette(summary["filesystem"].astype(str).tolist())
    made, skipped = [], []
    for model in sorted(summary["model"].unique()):
        safe = str(model).replace("/", "_")
        made.append(bandwidth_vs_nodes(summary, model, palette, out_dir / f"bandwidth_{safe}.png"))
        if "write" in set(summary.loc[summary["model"] == model, "phase"]):
            made.append(duration_vs_nodes(summary, model, palette, out_dir / f"duration_{safe}.png"))
    if summary["nodes"].nunique() > 1:
        made.append(efficiency(summary, palette, out_dir / "efficiency.png"))
    else:
        skipped.append("scaling efficiency: the study has a single node count")
    spread = rank_spread(ranks, palette, out_dir / "rank_spread.png") if not ranks.empty else None
    made.append(spread) if spread else skipped.append("per-rank spread: no per-rank write data")
    modes = io_mode_comparison(summary, palette, out_dir / "io_mode.png")
    made.append(modes) if modes else skipped.append("I/O mode comparison: the study has one I/O mode")
    return made, skipped
