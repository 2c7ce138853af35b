"""The recovery topic's outputs (`analysis.outputs`): time to the first step per restart, and its plots."""

from __future__ import annotations

from studyctl.analysis.outputs import PlotOutput, TableOutput
from studyctl.analysis.recovery.plots import recovery_plots

TABLES = (TableOutput("recovery", lambda t: t.recovery),)
PLOTS = (PlotOutput("recovery", lambda t, out_dir: recovery_plots(t.recovery_cells, out_dir)),)
