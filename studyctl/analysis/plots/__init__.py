"""Plots (matplotlib Agg, PNG), each a declared `Plot` (kind, title, path): functions of the tables alone.

One module per plot family: `scaling` (bandwidth, time, efficiency vs nodes), `bars` (one axis side by
side), `ranks` (per-rank spread), `requests` (an object store's requests by kind), `forest` (ratios),
`roofline` (cells against their shapes' ceilings). The report lists `Plot` objects; it never reads
meaning back out of file names.

The package itself imports only `Plot`: matplotlib is loaded with the first module that draws (a collect with
nothing new draws nothing and loads none of it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studyctl.analysis.plots.plot import Plot

if TYPE_CHECKING:
    from studyctl.analysis.plots.figures import make_plots
    from studyctl.analysis.plots.training import training_plots

__all__ = ["Plot", "make_plots", "training_plots"]


def __getattr__(name: str) -> Any:
    """`make_plots` and `training_plots`, imported when first asked for."""
    if name == "make_plots":
        from studyctl.analysis.plots.figures import make_plots
        return make_plots
    if name == "training_plots":
        from studyctl.analysis.plots.training import training_plots
        return training_plots
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
