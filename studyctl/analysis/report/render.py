"""Rendering the report context to HTML and Markdown (jinja2); templates ship with the package.

Every declared table (`analysis.section`) is drawn by one macro per flavour (templates/_section.*.j2) from the
helpers here: a cell's words (`cell_text`), its HTML classes, its header marked up for the flavour."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from studyctl.analysis.report.markdown import md, md_code, template_env
from studyctl.analysis.section import (
    LINE_BREAK,
    SOFT_HYPHEN,
    Column,
    cell_text,
    escaped_in_markdown,
    est,
    field,
    fmt,
    pct,
    pest,
    size,
    value,
)
from studyctl.fsutil import atomic_write_text


def html_header(column: Column) -> Markup:
    """A setting's name escaped; a declared header is the report's own words, shown as written."""
    text = str(escape(column.header)) if column.study_header else column.header
    return Markup(text.replace(LINE_BREAK, "<br>").replace(SOFT_HYPHEN, "&shy;"))


def html_class(column: Column, row: Any) -> str:
    """"l" for a left-aligned cell, its declared classes, "bad" where its `bad_when` key holds."""
    bad = "bad" if column.bad_when and field(row, column.bad_when) else ""
    return " ".join(c for c in ("l" if column.left else "", column.css, bad) if c)


def md_header(column: Column) -> str:
    text = column.header.replace(LINE_BREAK, " ").replace(SOFT_HYPHEN, "")
    return md(text) if column.study_header else text


def md_rule(columns: list[Column]) -> str:
    """The alignment row: left columns `---`, the rest (numbers) right-aligned `---:`."""
    return "|" + "".join("---|" if c.left else "---:|" for c in columns)


def md_cell(column: Column, row: Any) -> str:
    text = cell_text(column, row)
    text = md_code(text) if column.format == "code" else md(text) if escaped_in_markdown(column) else text
    return f"**{text}**" if column.strong == "both" else text


@cache
def _env() -> jinja2.Environment:
    """Compiled once per process (compiling both templates took longer than rendering them)."""
    env = template_env()
    env.globals.update(fmt=fmt, pct=pct, size=size, value=value, est=est, pest=pest, cell_text=cell_text,
                       html_class=html_class, md_cell=md_cell)
    env.filters.update(html_header=html_header, md_header=md_header, md_rule=md_rule)
    return env


def render(context: dict[str, Any], html: Path, md_path: Path) -> tuple[Path, Path]:
    env = _env()
    atomic_write_text(html, env.get_template("report.html.j2").render(**context))
    atomic_write_text(md_path, env.get_template("report.md.j2").render(**context))
    return html, md_path
