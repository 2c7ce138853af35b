"""Markdown escaping for the .md reports (report.md, mlperf.md), and the jinja2 environment both use.

Text from a study (its description, model and filesystem names, DLIO fields, point directory names,
reasons) is data, never Markdown: `md` shows it as the same characters (no heading, list, emphasis,
link, raw tag or table cell boundary), `md_code` as one inline code span, `md_url` as a link target
that stays a relative path. HTML templates are escaped by jinja2's autoescape instead.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

# CommonMark lets any ASCII punctuation be backslash-escaped. Escaped anywhere in a line: what can start or
# end Markdown syntax there ('&' an entity, '|' a table cell, '~' strike-through, '<' a raw tag or autolink,
# '[' a link or image: with it escaped, '(', ')' and '!' mean nothing). '_' only where it is not inside a
# word (intraword '_' is never emphasis: snake_case stays readable). The rest only at the start of a line:
# a heading, block quote, list item, setext underline, table rule, ordered list ("1. ", not "3.11").
INLINE = re.compile(r"([\\`*\[\]<#|~&])|(?<![^\W_])_|_(?![^\W_])")
LINE_START = re.compile(r"^(\s*)([-+=:>]|\d+(?=[.)](?:\s|$)))")
SPACE = re.compile(r"[\s\x00-\x1f\x7f]+")  # newlines, tabs, control characters: one space (one line, one cell)


def _one_line(value: Any) -> str:
    return SPACE.sub(" ", str(value)).strip()


def md(value: Any) -> str:
    """`value` as Markdown text showing exactly its characters, on one line (safe in a table cell)."""
    text = INLINE.sub(lambda m: "\\" + m.group(0), _one_line(value))
    return LINE_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if not m.group(2).isdigit()
                          else f"{m.group(1)}{m.group(2)}\\", text)


def md_code(value: Any) -> str:
    """`value` as one inline code span (a fence longer than any run of backticks in it). With a '|' it is
    `md` text instead: GFM splits a table row at '|' even inside code, and '\\|' shows as itself elsewhere."""
    text = _one_line(value)
    if "|" in text:
        return md(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_url(value: Any) -> str:
    """A relative link target (a plot's path): percent-encoded, so no ')' , space or scheme breaks out."""
    return quote(_one_line(value), safe="/")


def template_dir() -> Path:
    """Templates ship inside the wheel as studyctl/templates; in a checkout they are ./templates."""
    package = Path(str(resources.files("studyctl")))
    packaged = package / "templates"
    return packaged if packaged.is_dir() else package.parent / "templates"


def template_env() -> jinja2.Environment:
    """HTML autoescaped; Markdown through the `md`, `md_code` and `md_url` filters."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(template_dir()),
                             autoescape=jinja2.select_autoescape(["html", "html.j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(md=md, md_code=md_code, md_url=md_url)
    return env
