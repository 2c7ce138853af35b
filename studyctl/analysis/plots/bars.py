"""One axis side by side (I/O mode by default) at each series' largest node count, like with like.

A group of bars is one combination of every other varying axis: nothing is averaged over an axis the
plot does not show, and each bar's interval is its own cell's.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib import pyplot as plt

from studyctl.analysis.cells import DERIVED, HEADLINE, MEASURED, independent, varying
from studyctl.analysis.labels import axis_label, describe_cell
from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.style import COLOURS, PHASE_TITLE, phases, save

HATCHES = ("", "//", "..", "xx", "\\\\", "++")


def _bar_values(sub: pd.DataFrame, groups: pd.DataFrame, group_cols: list[str], bar: dict[str, str]
                ) -> tuple[list[int], list[float], list[float]]:
    """Per group position, the one summary row of this bar (every column equal, nothing averaged)."""
    xs, ys, errs = [], [], []
    for j, (_, grow) in enumerate(groups.iterrows()):
        match = sub
        for col in group_cols:
            match = match[match[col].astype(str) == str(grow[col])]
        for col, value in bar.items():
            match = match[match[col].astype(str) == value]
        if len(match) == 1:
            xs.append(j)
            ys.append(float(match[HEADLINE].iloc[0]))
            errs.append(float(match[f"{HEADLINE}_ci95"].fillna(0).iloc[0]))
    return xs, ys, errs


def axis_bars(summary: pd.DataFrame, axis: str, path: Path, limit: int = 16) -> tuple[Path | None, str | None]:
    values = sorted(summary[axis].astype(str).unique()) if axis in summary else []
    if len(values) < 2:
        return None, f"{axis} comparison: the study has one {axis}"
    if kept(path, summary, axis, limit):
        return path, None
    others = independent(summary, varying(summary, (axis, "nodes", *MEASURED, *DERIVED)))
    series = [*others, "phase"]
    largest = summary.groupby(series, dropna=False)["nodes"].transform("max") if others else summary["nodes"].max()
    data = summary[summary["nodes"] == largest]
    bar_keys = independent(data, [axis, *(m for m in MEASURED if m in data and data[m].nunique() > 1)])
    bars = list(data[bar_keys].astype(str).drop_duplicates().itertuples(index=False, name=None))
    cols = phases(data)
    groups = data[[*others, "nodes"]].drop_duplicates().head(limit) if others else data[["nodes"]].drop_duplicates()
    width = min(18.0, max(6.5, 0.5 * len(groups) * len(bars) + 2.5))
    fig, axes = plt.subplots(len(cols), 1, figsize=(width, 3.8 * len(cols) + 0.8), squeeze=False)
    step = 0.8 / len(bars)
    for ax, phase in zip(axes[:, 0], cols, strict=True):
        sub = data[data["phase"] == phase]
        for i, bar in enumerate(bars):
            xs, ys, errs = _bar_values(sub, groups, [*others, "nodes"], dict(zip(bar_keys, bar, strict=True)))
            label = " ".join(axis_label(k, v) for k, v in zip(bar_keys, bar, strict=True))
            below = [min(e, y) for e, y in zip(errs, ys, strict=True)]  # an interval stops at 0
            ax.bar([x + (i - (len(bars) - 1) / 2) * step for x in xs], ys, step, yerr=[below, errs], capsize=2,
                   label=label, color=COLOURS[i % len(COLOURS)], alpha=0.85, hatch=HATCHES[i % len(HATCHES)],
                   edgecolor="black", linewidth=0.4)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([describe_cell(dict(g), [*others, "nodes"]).replace(", ", "\n")
                            for _, g in groups.iterrows()], fontsize=8)
        ax.set_ylabel("total bytes / total time (GiB/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{axis}: {PHASE_TITLE[phase]}, at each series' largest node count")
    handles, labels = axes[0][0].get_legend_handles_labels()
    return save(fig, path, handles, labels, f"{axis} (± 95% CI)"), None
