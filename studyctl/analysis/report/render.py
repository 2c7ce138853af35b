"""Rendering the report context to HTML and Markdown (jinja2); templates ship with the package."""

from __future__ import annotations

from functools import cache
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


def _est(x: Any, half: Any, digits: int = 3) -> str:
    """A mean with its 95% half-width: `12.300 ± 0.400`; the mean alone when there is no CI."""
    return _fmt(x, digits) + ("" if missing(x) or missing(half) else f" ± {half:.{digits}f}")


def _pest(x: Any, half: Any) -> str:
    """A share with its 95% half-width, in percent: `5.1% ± 0.3%`."""
    return "–" if missing(x) else f"{x * 100:.1f}%" + ("" if missing(half) else f" ± {half * 100:.1f}%")


@cache
def _env() -> jinja2.Environment:
    """Compiled once per process (compiling both templates took longer than rendering them)."""
    env = template_env()
    env.globals.update(fmt=_fmt, pct=_pct, size=_size, value=_value, est=_est, pest=_pest)
    return env


def render(context: dict[str, Any], html: Path, md: Path) -> tuple[Path, Path]:
    env = _env()
    atomic_write_text(html, env.get_template("report.html.j2").render(**context))
    atomic_write_text(md, env.get_template("report.md.j2").render(**context))
    return html, md
