"""How plots show axes: every varying axis gets its own visual channel, the rest become facets.

An `Encoding` maps each axis that varies (other than the x axis) to colour, marker or line style, in
that order, the axis with the most values taking colour; an axis with more values than a channel can
show, or one beyond the channels, or one that would make a panel carry more series than a reader can
tell apart, becomes a facet (a row of panels). Every plot styles its series through an Encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from studyctl.analysis.adequacy import not_a_cold_read
from studyctl.analysis.forked import in_child
from studyctl.analysis.labels import axis_label
from studyctl.analysis.output_memo import drawn
from studyctl.analysis.values import missing
from studyctl.fsutil import atomic_open

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType  # matplotlib >= 3.8; annotations only

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
CHANNELS: tuple[tuple[str, tuple[Any, ...]], ...] = (("color", COLOURS), ("marker", MARKERS),
                                                      ("linestyle", LINESTYLES))
DEFAULT = {"color": "#1f77b4", "marker": "o", "linestyle": "-"}
MAX_SERIES_PER_PANEL = 8
MAX_FACETS = 12


class LineKw(TypedDict):
    """Line2D keywords, typed as matplotlib's stubs want them (a plain dict would be dict[str, object])."""

    color: str
    alpha: float
    linestyle: tuple[float, tuple[float, ...]]
    linewidth: float


IDEAL = LineKw(color="grey", alpha=0.6, linestyle=(0, (1, 2)), linewidth=1.3)
PHASE_TITLE = {"write": "checkpoint write", "read": "restore (read)"}
DPI = 110
plt.rcParams.update({"font.size": 10.5, "axes.titlesize": 11.5, "axes.labelsize": 11, "legend.fontsize": 9,
                     "axes.spines.top": False, "axes.spines.right": False})


def style_key(value: Any) -> Any:
    """A value as a style-table key: every missing value (None, NaN, NaT) is one key, None."""
    return None if missing(value) else value


def _sorted_values(values: Any) -> list[Any]:
    keys = {style_key(v) for v in pd.unique(values)}
    return sorted(keys, key=lambda v: (v is not None, str(type(v)), v if isinstance(v, (int, float)) else str(v)))


@dataclass
class Encoding:
    """axis → (channel, value → style); facet axes; built by `encode`."""

    channels: dict[str, tuple[str, dict[Any, Any]]] = field(default_factory=dict)
    facets: list[str] = field(default_factory=list)

    @property
    def series_axes(self) -> list[str]:
        return list(self.channels)

    def style(self, key: dict[str, Any]) -> dict[str, Any]:
        out = dict(DEFAULT)
        for axis, (channel, styles) in self.channels.items():
            out[channel] = styles.get(style_key(key[axis]), out[channel])
        return out

    def legend(self) -> tuple[list[Line2D], list[str]]:
        """One entry per value of each channel axis, drawn in that channel only."""
        handles, labels = [], []
        for axis, (channel, styles) in self.channels.items():
            for value, style in styles.items():
                color, marker = "#333333", ""
                linestyle: LineStyleType = "-"
                if channel == "marker":
                    marker, linestyle = style, ""
                elif channel == "color":
                    color = style
                else:
                    linestyle = style
                handles.append(Line2D([], [], color=color, marker=marker, linestyle=linestyle, markersize=7,
                                      linewidth=1.8))
                labels.append(axis_label(axis, value))
        return handles, labels

    def facet_groups(self, data: pd.DataFrame) -> list[tuple[dict[str, Any], pd.DataFrame]]:
        if not self.facets:
            return [({}, data)]
        groups = data.groupby(self.facets, dropna=False, sort=True)
        return [(dict(zip(self.facets, k if isinstance(k, tuple) else (k,), strict=True)), g) for k, g in groups]

    def series(self, data: pd.DataFrame, x: str) -> list[tuple[dict[str, Any], pd.DataFrame]]:
        axes = self.series_axes
        if not axes:
            return [({}, data.sort_values(x))]
        groups = data.groupby(axes, dropna=False, sort=True)
        return [(dict(zip(axes, k if isinstance(k, tuple) else (k,), strict=True)), g.sort_values(x))
                for k, g in groups]


def encode(data: pd.DataFrame, axes: Sequence[str]) -> Encoding:
    """Channels for `axes` (most values first), facets for what does not fit."""
    counts = {a: len(pd.unique(data[a])) for a in axes}
    order = sorted(axes, key=lambda a: -counts[a])
    enc = Encoding()
    free = list(CHANNELS)
    for axis in order:
        slot = next((c for c in free if len(c[1]) >= counts[axis]), None)
        if slot is None:
            enc.facets.append(axis)
            continue
        free.remove(slot)
        channel, styles = slot
        enc.channels[axis] = (channel, dict(zip(_sorted_values(data[axis]), styles, strict=False)))
    while enc.channels and _panel_series(data, enc) > MAX_SERIES_PER_PANEL:
        fewest = min(enc.channels, key=lambda a: counts[a])
        del enc.channels[fewest]
        enc.facets.append(fewest)
    return enc


def _panel_series(data: pd.DataFrame, enc: Encoding) -> int:
    groups = [g for _, g in enc.facet_groups(data)]
    axes = enc.series_axes
    return max(len(g.drop_duplicates(axes)) for g in groups) if axes else 1


def facet_title(values: dict[str, Any]) -> str:
    return ", ".join(axis_label(a, v) for a, v in values.items())


def labels_of(handles: Sequence[Any]) -> list[str]:
    """Legend labels of artists (matplotlib types `get_label()` as object)."""
    return [str(h.get_label()) for h in handles]


def save(fig: plt.Figure, path: Path, handles: Sequence[Any] = (), labels: Sequence[str] = (),
         title: str | None = None) -> Path:
    """Legend outside the data on the right, tight layout, atomic write (in a child inside `forked.forking`);
    recorded for `output_memo.kept` once written."""
    if handles:
        fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.95), frameon=False, title=title)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        in_child(path, lambda: _write(fig, path), lambda: drawn(path))
    finally:
        plt.close(fig)
    return path


# zlib's fastest level: a figure's flat colours compress nearly as well (a tenth larger), in half the time of the
# default level (which was an eighth of rendering a figure)
PNG_COMPRESSION = 1


def _write(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    with atomic_open(path) as fh:  # a fresh temporary name each time: concurrent collects never share one
        fig.savefig(fh, format="png", dpi=DPI, bbox_inches="tight", facecolor="white",
                    pil_kwargs={"compress_level": PNG_COMPRESSION})


def nodes_axis(ax: plt.Axes, nodes: Sequence[Any]) -> None:
    """log2 x-axis with a tick at every node count measured."""
    ticks = sorted({int(n) for n in nodes})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("nodes (log₂ scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlim(ticks[0] / 1.4, ticks[-1] * 1.4)


def phases(data: pd.DataFrame) -> list[str]:
    return [p for p in ("write", "read") if p in set(data["phase"])]


def flagged_hollow(flags: Any) -> bool:
    """Cells whose reads were not cold (warm, memory, DLIO) are drawn hollow: never shown as cold reads."""
    return not_a_cold_read(flags)


def panel_grid(n_rows: int, n_cols: int, width: float = 5.6, height: float = 4.0) -> tuple[plt.Figure, Any]:
    return plt.subplots(n_rows, n_cols, figsize=(width * n_cols, height * n_rows + 0.4), squeeze=False)
