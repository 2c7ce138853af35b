"""The training topic's outputs (`analysis.outputs`): what checkpoints cost training, per point, and its plots."""

from __future__ import annotations

from studyctl.analysis.outputs import PlotOutput, TableOutput
from studyctl.analysis.training.plots import training_plots

TABLES = (TableOutput("training", lambda t: t.training),)
PLOTS = (PlotOutput("training", lambda t, out_dir: training_plots(t.training_cells, out_dir)),)
