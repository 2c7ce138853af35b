"""Report tables declared once (`analysis.section`): HTML and Markdown show every declared table with the same
columns in the same order, and a section a topic declares appears in both with no template edit.

The study is real result files (tests/resultgen.py: an engine study, its ceiling and its engines side by side)
through the tables, the context and both templates; the integration test does the same on a study run for real.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from studyctl.analysis.hardware.section import HARDWARE, SHAPES
from studyctl.analysis.recovery.section import RECOVERY
from studyctl.analysis.report.context import build_context
from studyctl.analysis.report.engines import ENGINES
from studyctl.analysis.report.render import render
from studyctl.analysis.report.sections import REQUESTS, SUMMARY, topic_declarations
from studyctl.analysis.section import LINE_BREAK, SOFT_HYPHEN, Column, Section, table
from studyctl.analysis.tables import build_tables
from studyctl.analysis.training.section import TRAINING
from tests.unit.test_engine_report import engine_study

DECLARED = (SUMMARY, ENGINES, HARDWARE, SHAPES, REQUESTS, TRAINING, RECOVERY,
            *(d.section for d in topic_declarations()))
RULE = re.compile(r"^\|(?:---:?\|)+$")
MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


class _Headers(HTMLParser):
    """Every table row of <th> cells, as the words a reader sees (a line break is a space)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag == "th":
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self._cell is not None:
            self.rows[-1].append("".join(self._cell).replace(SOFT_HYPHEN, ""))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_headers(html: str) -> list[list[str]]:
    parser = _Headers()
    parser.feed(html)
    return [r for r in parser.rows if r]


def md_headers(md: str) -> list[list[str]]:
    """The header row of every Markdown table (the line above an alignment row), unescaped."""
    lines = md.splitlines()
    return [[MD_ESCAPE.sub(r"\1", c) for c in lines[i - 1].strip("| ").split(" | ")]
            for i, line in enumerate(lines) if i and RULE.match(line)]


def words(column: Column) -> str:
    return column.header.replace(LINE_BREAK, " ").replace(SOFT_HYPHEN, "")


def of_section(section: Section, rows: list[list[str]]) -> list[list[str]]:
    """The header rows that are `section`'s: ending in its last column, holding its columns in order."""
    always = [words(c) for c in section.columns if not c.when]
    found = []
    for row in rows:
        rest = iter(row)
        if row and row[-1] == words(section.columns[-1]) and all(h in rest for h in always):
            found.append(row)
    return found


def same_columns(html: str, md: str) -> list[str]:
    """The declared sections shown, after checking each has the same header rows in both flavours."""
    shown = []
    in_html, in_md = html_headers(html), md_headers(md)
    for section in DECLARED:
        assert of_section(section, in_html) == of_section(section, in_md), section.id
        if of_section(section, in_html):
            shown.append(section.id)
    return shown


def test_every_declared_table_has_the_same_columns_in_html_and_markdown(tmp_path: Path) -> None:
    study = engine_study(tmp_path)
    context = build_context(study, "eng", None, build_tables(study), [], [], None, [], {})
    html, md = render(context, tmp_path / "r.html", tmp_path / "r.md")
    shown = same_columns(html.read_text(), md.read_text())
    assert {"summary", "engines", "hardware", "shapes"} <= set(shown)


def test_the_check_finds_a_column_missing_from_one_flavour(tmp_path: Path) -> None:
    study = engine_study(tmp_path)
    context = build_context(study, "eng", None, build_tables(study), [], [], None, [], {})
    html, md = render(context, tmp_path / "r.html", tmp_path / "r.md")
    text = md.read_text().replace("| ± 95% CI | GiB/s mean of rates |", "| GiB/s mean of rates |", 1)
    try:
        same_columns(html.read_text(), text)
    except AssertionError as e:
        assert "summary" in str(e)
    else:
        raise AssertionError("a column missing from the Markdown summary went unnoticed")


def test_a_declared_section_appears_in_both_flavours_with_no_template_edit(tmp_path: Path) -> None:
    """What a topic's `REPORT_SECTIONS` adds: a Section and its rows; the templates draw it as it is."""
    study = engine_study(tmp_path)
    tables = build_tables(study)
    context = build_context(study, "eng", None, tables, [], [], None, [], {})
    new = Section("engine_bytes", (Column("engine", "engine", "text", align="left"),
                                   Column("phase", "phase", "text", align="left"),
                                   Column("bytes\nwritten", "bytes", "size", strong="both")),
                  title="Bytes per engine", intro="What each engine's cell moved, per phase.")
    context["topic_sections"] = [table(new, tables.summary.to_dict("records"))]
    html, md = render(context, tmp_path / "r.html", tmp_path / "r.md")
    html_text, md_text = html.read_text(), md.read_text()
    assert '<h2 id="engine_bytes">Bytes per engine</h2>' in html_text and "## Bytes per engine" in md_text
    assert '<a href="#engine_bytes">' in html_text and "What each engine's cell moved" in md_text
    assert of_section(new, html_headers(html_text)) == of_section(new, md_headers(md_text)) \
        == [["engine", "phase", "bytes written"]]
    s = tables.summary
    assert md_text.count("| stream | write | **") == ((s["engine"] == "stream") & (s["phase"] == "write")).sum() > 0
