"""The hardware topic's outputs (`analysis.outputs`): the ceilings measured per shape. Its roofline plots are
drawn with the summary's (`analysis.figures`), whose order they keep."""

from __future__ import annotations

from studyctl.analysis.outputs import TableOutput

TABLES = (TableOutput("ceilings", lambda t: t.ceilings),)
