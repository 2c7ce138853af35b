"""Rendering the report context to HTML and Markdown (jinja2); templates ship with the package."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from studyctl.analysis.values import missing
from studyctl.fsutil import atomic_write_text
from studyctl.units import format_bytes


def template_dir() -> Path:
    """Templates ship inside the wheel as studyctl/templates; in a checkout they are ./templates."""
    package = Path(str(resources.files("studyctl")))
    packaged = package / "templates"
    return packaged if packaged.is_dir() else package.parent / "templates"


def _fmt(x: Any, digits: int = 3) -> str:
    return "–" if missing(x) else f"{x:.{digits}f}"


def _pct(x: Any) -> str:
    return "–" if missing(x) else f"{x * 100:.0f}%"


def _size(n: Any) -> str:
    return "–" if missing(n) else format_bytes(n, 1)


def _value(x: Any) -> str:
    return "–" if missing(x) else str(x)


def _md_cell(x: Any) -> str:
    """Markdown table cells: no pipes or newlines from user text."""
    return str(x).replace("|", "/").replace("\n", " ")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(template_dir()),
                             autoescape=jinja2.select_autoescape(["html", "html.j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(fmt=_fmt, pct=_pct, size=_size, value=_value)
    env.filters["md"] = _md_cell
    return env


def render(context: dict[str, Any], html: Path, md: Path) -> tuple[Path, Path]:
    env = _env()
    atomic_write_text(html, env.get_template("report.html.j2").render(**context))
    atomic_write_text(md, env.get_template("report.md.j2").render(**context))
    return html, md
