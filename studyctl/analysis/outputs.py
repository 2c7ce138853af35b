"""What a collect writes, declared once per topic: its tables (CSV + Parquet) and its plots (PNG).

A topic names each table it writes and the function that builds it from the study's tables, and each set of
plots it draws, in `TABLES` and `PLOTS` of its `<topic>/outputs.py`; `collect` writes every declaration it finds
(`declared`) with no list of its own, so a topic adds an output in its own files. The functions take the study's
`analysis.tables.Tables`, which a topic may not import: they read the attributes they need.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import studyctl.analysis


@dataclass(frozen=True)
class TableOutput:
    """A table written as `<name>.csv` and `<name>.parquet`: `build` makes its frame from the study's tables."""

    name: str
    build: Callable[[Any], Any]


@dataclass(frozen=True)
class PlotOutput:
    """A set of plots: `draw` draws them from the study's tables into a folder and says which it skipped and why
    (plots, skipped)."""

    name: str
    draw: Callable[[Any, Path], tuple[list[Any], list[str]]]


def declared(kind: str, base: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    """`base`, then every `kind` (`TABLES` or `PLOTS`) a topic package's `outputs` module declares, in topic order;
    a name declared twice is refused (two writers of one file)."""
    found = list(base)
    for info in sorted(pkgutil.iter_modules(studyctl.analysis.__path__), key=lambda i: i.name):
        if info.ispkg and importlib.util.find_spec(f"studyctl.analysis.{info.name}.outputs"):
            module = importlib.import_module(f"studyctl.analysis.{info.name}.outputs")
            found.extend(getattr(module, kind, ()))
    names = [o.name for o in found]
    if len(set(names)) != len(names):
        raise ValueError(f"{kind}: a name declared twice in {names}")
    return tuple(found)
