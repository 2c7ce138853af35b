"""Plots (matplotlib Agg, PNG), each a declared `Plot` (kind, title, path): functions of the tables alone.

Shared drawing: `style` and `plot` (the declared `Plot`), and the summary's plot families: `scaling` (bandwidth,
time, efficiency vs nodes), `bars` (one axis side by side), `ranks` (per-rank spread), `requests` (an object
store's requests by kind), `forest` (ratios). A topic's own figures live in its package (`hardware.table.roofline`,
`training.plots`, `recovery.table.plots`), declared in its `outputs` module (`analysis.outputs`);
`analysis.figures` draws the summary's set. The report lists `Plot`
objects; it never reads meaning back out of file names.

The package itself imports only `Plot`: matplotlib is loaded with the first module that draws (a collect with
nothing new draws nothing and loads none of it).
"""

from __future__ import annotations

from studyctl.analysis.plots.plot import Plot

__all__ = ["Plot"]
