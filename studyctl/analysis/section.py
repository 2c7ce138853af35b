"""A report table declared once: its columns (header, value, format, alignment, emphasis) as plain data.

Both report flavours draw every declared table through one template macro (`templates/_section.j2`), so a
column's header, value and format are written in one place and HTML and Markdown cannot disagree. A topic
declares its table beside the rows it builds (`<topic>/section.py`); the report puts `table(...)` of it in
the template context. Nothing here knows jinja: the macro asks `cell_text` for a cell's words and escapes
them for its flavour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from studyctl.analysis.values import missing
from studyctl.units import format_bytes

# How a cell's value becomes text. `text`, `value` and `code` are words from the study (escaped for Markdown,
# `code` as an inline code span); the numeric formats and `raw` are the report's own text, shown as they are.
Format = Literal["text", "value", "code", "raw", "fmt", "pct", "size", "est", "pest"]
# "both": bold in HTML and Markdown; "html": bold in HTML only (the Markdown tables bold only the verdicts).
Strong = Literal["", "both", "html"]
LINE_BREAK = "\n"  # in a header: <br> in HTML, a space in Markdown
SOFT_HYPHEN = "\u00ad"  # in a header: &shy; in HTML, nothing in Markdown


def fmt(x: Any, digits: int = 3) -> str:
    return "–" if missing(x) else f"{x:.{digits}f}"


def pct(x: Any) -> str:
    return "–" if missing(x) else f"{x * 100:.0f}%"


def size(n: Any) -> str:
    return "–" if missing(n) else format_bytes(n, 1)


def value(x: Any) -> str:
    return "–" if missing(x) else str(x)


def est(x: Any, half: Any, digits: int = 3) -> str:
    """A mean with its 95% half-width: `12.300 ± 0.400`; the mean alone when there is no CI."""
    return fmt(x, digits) + ("" if missing(x) or missing(half) else f" ± {half:.{digits}f}")


def pest(x: Any, half: Any) -> str:
    """A share with its 95% half-width, in percent: `5.1% ± 0.3%`."""
    return "–" if missing(x) else f"{x * 100:.1f}%" + ("" if missing(half) else f" ± {half * 100:.1f}%")


def field(row: Any, key: str) -> Any:
    """A row's value: rows are records (dicts) or small row objects (coverage, problems)."""
    return row[key] if isinstance(row, Mapping) else getattr(row, key)


@dataclass(frozen=True)
class Column:
    """One column. `value`: a row key, several keys (the formatter's arguments: `est`'s mean and half-width)
    or a function of the row for a cell that joins several; `when`: the name of a table option that must be
    true for the column to show (a peak column only where peaks are stated); `bad_when`: a row key whose
    truth marks the HTML cell `bad`; `css`: extra HTML classes of the cell."""

    header: str
    value: str | tuple[str, ...] | Callable[[Any], Any]
    format: Format = "raw"
    digits: int | None = None
    align: Literal["left", "right"] = "right"
    strong: Strong = ""
    when: str = ""
    css: str = ""
    bad_when: str = ""
    study_header: bool = False  # the header is a word from the study (a setting's name): escaped for Markdown
    copy: bool = False  # a command to copy (`code`): HTML selects it whole in one click

    @property
    def left(self) -> bool:
        return self.align == "left"


@dataclass(frozen=True)
class Section:
    """A declared report table: `id` names it (its tests find it by it), `axes` says whether a column per
    varying setting leads its rows, `wide` that HTML may scroll it sideways, `empty` the HTML row shown when
    it has no rows (none: no such row). `title` and `intro` head a section the report draws by itself (one a
    topic adds through its `REPORT_SECTIONS`); the report's own sections keep their prose in the templates."""

    id: str
    columns: tuple[Column, ...]
    axes: bool = False
    wide: bool = False
    empty: str = ""
    title: str = ""
    intro: str = ""


@dataclass(frozen=True)
class Declared:
    """A section a topic adds to the report: its declaration and its rows, a function of the study's tables
    (`analysis.tables.Tables`, which a topic may not import: it reads the attributes it needs)."""

    section: Section
    rows: Callable[[Any], Sequence[Any]]


@dataclass(frozen=True)
class Table:
    """A section filled in for one report: its columns for this study, in order, and its rows."""

    section: Section
    columns: tuple[Column, ...]
    rows: Sequence[Any]


def axis_column(key: str, title: str) -> Column:
    return Column(title, key, "value", align="left", study_header=True)


def table(section: Section, rows: Iterable[Any], axes: Sequence[str] = (),
          titles: Mapping[str, str] | None = None, **options: bool) -> Table:
    """`section` for this study: a leading column per varying setting (`axes`, headed by `titles`), then its
    declared columns whose `when` option holds."""
    lead = tuple(axis_column(a, (titles or {}).get(a, a)) for a in axes) if section.axes else ()
    shown = tuple(c for c in section.columns if not c.when or options.get(c.when, False))
    return Table(section, lead + shown, list(rows))


FORMATTERS: dict[str, Callable[..., str]] = {
    "text": str, "raw": str, "code": str, "value": value, "fmt": fmt, "pct": pct, "size": size,
    "est": est, "pest": pest,
}


def cell_text(column: Column, row: Any) -> str:
    """The words in `row`'s cell of `column`, before any escaping."""
    if callable(column.value):
        args = column.value(row)
        args = args if isinstance(args, tuple) else (args,)
    elif isinstance(column.value, tuple):
        args = tuple(field(row, k) for k in column.value)
    else:
        args = (field(row, column.value),)
    digits = () if column.digits is None else (column.digits,)
    return FORMATTERS[column.format](*args, *digits)


def escaped_in_markdown(column: Column) -> bool:
    """Words from the study are escaped in Markdown; the report's own numbers and text are not."""
    return column.format in ("text", "value")
