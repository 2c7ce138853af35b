"""restore_time.png: time to restore, one bar per restore mode, one group per combination of every other
setting that varies (ZeRO stage, I/O mode, strategy, nodes, ...: derived from the training table, never a
list), so no two settings are pooled into one bar. The broadcast share is hatched; means over repetitions,
projected to the nominal checkpoint size when the run was scaled.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.patches import Patch

from studyctl.analysis.cells import DERIVED, MEASURED, describe_cell, independent, varying
from studyctl.analysis.plots.style import COLOURS, plt, save
from studyctl.units import format_bytes

MODE = "restore"
MEANS = ("restore_s", "broadcast_s", "restore_bytes", "projection_factor")


def restore_groups(training: pd.DataFrame) -> tuple[list[str], pd.DataFrame]:
    """(the settings that tell groups apart, one row per group × restore mode: means over repetitions)."""
    data = training[training["restore_s"].notna()]
    groups = independent(data, varying(data, (MODE, "phase", *MEASURED, *DERIVED)))
    keys = [*groups, MODE] if MODE in data else groups
    means = [c for c in MEANS if c in data]
    cells = data.groupby(keys or ["model"], dropna=False, sort=True)[means].mean().reset_index()
    return groups, cells


def restore_time(training: pd.DataFrame, path: Path, limit: int = 16) -> Path:
    groups, cells = restore_groups(training)
    modes = sorted(cells[MODE].astype(str).unique()) if MODE in cells else ["rank"]
    combos = cells[groups].drop_duplicates().head(limit) if groups else cells.head(1)[[]]
    width = 0.8 / max(len(modes), 1)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.55 * len(combos) * len(modes) + 2.5), 5.0 + 0.15 * len(groups)))
    for j, (_, combo) in enumerate(combos.iterrows()):
        match = cells
        for col in groups:
            match = match[match[col].astype(str) == str(combo[col])]
        for i, mode in enumerate(modes):
            row = match[match[MODE].astype(str) == mode] if MODE in match else match
            if row.empty:
                continue
            x = j + (i - (len(modes) - 1) / 2) * width
            total = float(row["restore_s"].iloc[0])
            bcast = float(row["broadcast_s"].fillna(0).iloc[0]) if "broadcast_s" in row else 0.0
            ax.bar(x, total, width, color=COLOURS[i % len(COLOURS)], edgecolor="black", linewidth=0.4,
                   label=mode if j == 0 else None)
            if bcast > 0:
                ax.bar(x, min(bcast, total), width, bottom=total - min(bcast, total), color="none", hatch="//",
                       edgecolor="black", linewidth=0.4)
            if "restore_bytes" in row and "projection_factor" in row:
                restored = float(row["restore_bytes"].iloc[0] * row["projection_factor"].iloc[0])
                ax.annotate(format_bytes(restored, 0), (x, total), ha="center", va="bottom", fontsize=7.5,
                            xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(combos)))
    ax.set_xticklabels([describe_cell(c.to_dict(), groups).replace(", ", "\n") for _, c in combos.iterrows()]
                       if groups else ["all points"], fontsize=8.5)
    ax.set_ylabel("time to restore, slowest rank (s)")
    ax.set_ylim(bottom=0)
    data = training[training["restore_s"].notna()]
    projected = " (projected to full size)" if "projected" in data and bool(data["projected"].any()) else ""
    shown = f"; {len(combos)} of {len(cells[groups].drop_duplicates())} groups" if groups and \
        len(cells[groups].drop_duplicates()) > len(combos) else ""
    ax.set_title(f"Restore time per restore mode{projected}{shown}; above each bar: bytes restored")
    handles, labels = ax.get_legend_handles_labels()
    if "broadcast_s" in data and data["broadcast_s"].fillna(0).gt(0).any():
        handles.append(Patch(facecolor="none", edgecolor="black", hatch="//"))
        labels.append("MPI_Bcast share")
    return save(fig, path, handles, labels, "restore mode")
