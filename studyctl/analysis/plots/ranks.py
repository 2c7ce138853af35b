"""Per-rank write bandwidth, one box (and its ranks as dots) per point: low outliers are stragglers.

Each box is labelled with every setting that varies among the points shown (strategy, restore, I/O mode,
anything: derived from the summary's cells, never a fixed list) and its repetition; colour is the filesystem.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib import pyplot as plt
from matplotlib.patches import Patch

from studyctl.analysis.cells import DERIVED, identity_columns, independent, varying
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.style import COLOURS, labels_of, save


def _point_settings(data: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """One row per point: its cell's settings (from the summary, by cell_key) and its repetition."""
    points = data.groupby("point_id", sort=False)[["cell_key", "repetition"]].first()
    if summary.empty or "cell_key" not in summary:
        return points.join(data.groupby("point_id", sort=False).first().drop(columns=["cell_key", "repetition"]))
    cells = summary.drop_duplicates("cell_key").set_index("cell_key")[identity_columns(summary)]
    return points.join(cells, on="cell_key")


def _label(points: pd.DataFrame, axes: list[str]) -> list[str]:
    return [f"{describe_cell(row, axes) if axes else row['model']}, rep {row['repetition']}"
            for row in points.to_dict("records")]


def point_axes(data: pd.DataFrame, summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Points (their cell's settings and repetition) and the settings that vary among them."""
    points = _point_settings(data, summary)
    cells = points[identity_columns(points)].drop_duplicates()  # the same answer as over 10,000 points, quicker
    return points, independent(cells, varying(cells, ("phase", *DERIVED)))


def point_labels(data: pd.DataFrame, summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Points with a `label` naming every setting that varies among them, and those settings."""
    points, axes = point_axes(data, summary)
    points["label"] = _label(points, axes)
    return points, axes


def rank_spread(ranks: pd.DataFrame, path: Path, summary: pd.DataFrame | None = None,
                limit: int = 32) -> tuple[Path | None, str | None]:
    """With more points than fit, the largest node counts (most ranks, where stragglers hurt) come first; only
    the points drawn are labelled and gathered (10,000 points: a tenth of the time)."""
    data = ranks[ranks["phase"] == "write"] if not ranks.empty else ranks
    if data.empty:
        return None, "per-rank spread: no per-rank write data"
    points, axes = point_axes(data, summary if summary is not None else pd.DataFrame())
    order = points.sort_values("nodes", ascending=False, kind="stable").head(limit)
    order = order.sort_values([*axes, "repetition"], key=lambda s: s.astype(str) if s.dtype == object else s)
    order = order.assign(label=_label(order, axes))
    colour = {fs: COLOURS[i % len(COLOURS)] for i, fs in enumerate(sorted(order["filesystem"].astype(str).unique()))}
    shown = data[data["point_id"].isin(order.index)]
    if kept(path, order, axes, len(points), shown[["point_id", "bandwidth_GiBps"]].reset_index(drop=True)):
        return path, None
    fig, ax = plt.subplots(figsize=(max(7.0, 0.42 * len(order) + 2.5), 5.0 + 0.12 * max(len(axes), 1)))
    by_point = dict(tuple(shown.groupby("point_id", sort=False)["bandwidth_GiBps"]))
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
    ax.set_xticklabels(order["label"], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("per-rank write bandwidth (GiB/s)")
    ax.set_ylim(bottom=0)
    more = f" ({len(order)} of {len(points)} points, largest node counts)" if len(points) > len(order) else ""
    ax.set_title(f"Per-rank write bandwidth, all checkpoints{more}")
    handles = [Patch(facecolor=c, alpha=0.5, label=fs) for fs, c in colour.items()]
    return save(fig, path, handles, labels_of(handles), "filesystem"), None
