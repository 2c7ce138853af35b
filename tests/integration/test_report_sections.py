"""A study run for real (16 points, MPI ranks, real files), collected: every declared report table shows the same
columns in the same order in report.html and report.md (the parsing: tests/unit/test_report_sections.py)."""

from __future__ import annotations

from pathlib import Path

from studyctl.api import collect as collect_study
from tests.integration.test_collect import copy_study
from tests.unit.test_report_sections import same_columns


def test_a_collected_study_shows_each_declared_table_alike_in_html_and_markdown(small_study: Path,
                                                                                  tmp_path: Path) -> None:
    out = collect_study(copy_study(small_study, tmp_path))
    shown = same_columns(out.report_html.read_text(), out.report_md.read_text())
    assert "summary" in shown
