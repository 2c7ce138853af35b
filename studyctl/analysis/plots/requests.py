"""Object store requests per checkpoint and restore, by kind, one bar group per cell on an object store.

Beside the bandwidth plots (where a filesystem of kind s3 is one more series): how many requests each cell's
checkpoint made (PUT with each multipart upload's initiate and complete, part uploads, ranged GETs), so a part
size or concurrency axis shows what it costs the store, not only what it reaches.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib import pyplot as plt

from studyctl.analysis.cells import DERIVED, MEASURED, independent, varying
from studyctl.analysis.columns import REQUEST_KINDS
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.output_memo import kept
from studyctl.analysis.plots.style import COLOURS, PHASE_TITLE, phases, save


def request_bars(summary: pd.DataFrame, path: Path, limit: int = 16) -> tuple[Path | None, str | None]:
    """Requests per checkpoint by kind (means over checkpoints) for the cells on an object store; a study with none
    has no such plot to miss (no reason given, as for restarts)."""
    if "requests_put" not in summary or summary["requests_put"].isna().all():
        return None, None
    data = summary[summary["requests_put"].notna()]
    if kept(path, data, limit):
        return path, None
    axes_shown = independent(data, varying(data, ("phase", *MEASURED, *DERIVED)))
    kinds = [k for k in REQUEST_KINDS if (data[f"requests_{k}"].fillna(0) > 0).any()]
    cols = phases(data)
    fig, axes = plt.subplots(len(cols), 1, figsize=(max(6.5, 1.2 * min(limit, len(data)) + 3), 3.6 * len(cols) + 0.8),
                             squeeze=False)
    step = 0.8 / max(1, len(kinds))
    for ax, phase in zip(axes[:, 0], cols, strict=True):
        sub = data[data["phase"] == phase].head(limit)
        for i, kind in enumerate(kinds):
            ax.bar([x + (i - (len(kinds) - 1) / 2) * step for x in range(len(sub))],
                   sub[f"requests_{kind}"].fillna(0), step, label=kind, color=COLOURS[i % len(COLOURS)], alpha=0.85,
                   edgecolor="black", linewidth=0.4)
        ax.set_xticks(range(len(sub)))
        ax.set_xticklabels([describe_cell(dict(r), axes_shown).replace(", ", "\n") or "all"
                            for _, r in sub.iterrows()], fontsize=8)
        ax.set_ylabel("requests per checkpoint")
        ax.set_title(f"object store requests: {PHASE_TITLE[phase]}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    return save(fig, path, handles, labels, "request kind"), None
