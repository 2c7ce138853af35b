"""Rendering the report context to HTML and Markdown (jinja2); templates ship with the package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from studyctl.analysis.report.markdown import template_env
from studyctl.analysis.values import missing
from studyctl.fsutil import atomic_write_text
from studyctl.units import format_bytes


def _fmt(x: Any, digits: int = 3) -> str:
    return "–" if missing(x) else f"{x:.{digits}f}"


def _pct(x: Any) -> str:
    return "–" if missing(x) else f"{x * 100:.0f}%"


def _size(n: Any) -> str:
    return "–" if missing(n) else format_bytes(n, 1)


def _value(x: Any) -> str:
    return "–" if missing(x) else str(x)


def _env() -> jinja2.Environment:
    env = template_env()
    env.globals.update(fmt=_fmt, pct=_pct, size=_size, value=_value)
    return env


def render(context: dict[str, Any], html: Path, md: Path) -> tuple[Path, Path]:
    env = _env()
    atomic_write_text(html, env.get_template("report.html.j2").render(**context))
    atomic_write_text(md, env.get_template("report.md.j2").render(**context))
    return html, md
