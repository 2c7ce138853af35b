"""The HTML and Markdown report: `context` builds what it shows, `render` writes it, `coverage` the point list."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from studyctl.analysis.plots import Plot
from studyctl.analysis.report.context import build_context
from studyctl.analysis.report.markdown import template_dir
from studyctl.analysis.report.render import render
from studyctl.analysis.status import PointStatus
from studyctl.analysis.tables import Tables
from studyctl.attempt.paths import StudyPaths

__all__ = ["render_report", "template_dir"]


def render_report(paths: StudyPaths, description: str | None, tables: Tables, plots: Sequence[Plot],
                  skipped_plots: Sequence[str], statuses: Sequence[PointStatus] | None,
                  table_paths: Sequence[Path], extras: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """report.html and report.md in the study directory (plot paths relative to it)."""
    context = build_context(paths.root, paths.name, description, tables, plots, skipped_plots, statuses,
                            table_paths, extras or {})
    return render(context, paths.report_html, paths.report_md)
