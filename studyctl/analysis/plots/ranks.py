"""Per-rank write bandwidth, one box (and its ranks as dots) per point: low outliers are stragglers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.patches import Patch

from studyctl.analysis.plots.style import COLOURS, labels_of, save

ORDER = ["model", "nodes", "zero_stage", "io_mode", "filesystem", "repetition"]


def rank_spread(ranks: pd.DataFrame, path: Path, limit: int = 32) -> tuple[Path | None, str | None]:
    """With more points than fit, the largest node counts (most ranks, where stragglers hurt) come first."""
    data = ranks[ranks["phase"] == "write"] if not ranks.empty else ranks
    if data.empty:
        return None, "per-rank spread: no per-rank write data"
    points = data.groupby("point_id", sort=False).first()
    order = points.sort_values(ORDER, ascending=[True, False, True, True, True, True])
    order = order.sort_values("nodes", ascending=False, kind="stable").head(limit).sort_values(ORDER)
    colour = {fs: COLOURS[i % len(COLOURS)] for i, fs in enumerate(sorted(order["filesystem"].astype(str).unique()))}
    fig, ax = plt.subplots(figsize=(max(7.0, 0.42 * len(order) + 2.5), 5.0))
    by_point = dict(tuple(data.groupby("point_id", sort=False)["bandwidth_GiBps"]))
    values = [by_point[pid].to_numpy() for pid in order.index]
    box = ax.boxplot(values, patch_artist=True, widths=0.6, showfliers=False)
    for i, (patch, (_, row)) in enumerate(zip(box["boxes"], order.iterrows(), strict=True)):
        c = colour[str(row["filesystem"])]
        patch.set_facecolor(c)
        patch.set_alpha(0.35)
        jitter = [((j * 0.618) % 1 - 0.5) * 0.35 for j in range(len(values[i]))]
        ax.scatter([i + 1 + x for x in jitter], values[i], s=9, color=c, alpha=0.8, zorder=3, linewidths=0)
    for median in box["medians"]:
        median.set_color("black")
    ax.set_xticks(range(1, len(order) + 1))
    ax.set_xticklabels([f"{r.model} Z{r.zero_stage} {r.nodes}n {r.io_mode[:3]} r{r.repetition} {r.Index[:4]}"
                        for r in order.itertuples()], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("per-rank write bandwidth (GiB/s)")
    ax.set_ylim(bottom=0)
    shown = f" ({len(order)} of {len(points)} points, largest node counts)" if len(points) > len(order) else ""
    ax.set_title(f"Per-rank write bandwidth, all checkpoints{shown}")
    handles = [Patch(facecolor=c, alpha=0.5, label=fs) for fs, c in colour.items()]
    return save(fig, path, handles, labels_of(handles), "filesystem"), None
