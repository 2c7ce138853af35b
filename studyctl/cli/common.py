"""What every command shares: the consoles, the error guard, common options."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from studyctl.errors import UserError, os_error_line

# What is printed comes from data and the environment (paths, names, reasons): shown verbatim, never read as
# console markup ('[/x]' would crash, '[project]' vanish), emoji codes or highlighting; a line is never
# broken. Style is only ever given structurally: `styled` (rich Text), never by markup in a string.
# Tables are wide when piped (CI logs, files); the terminal's width otherwise.
out = Console(width=None if sys.stdout.isatty() else 180, markup=False, emoji=False, highlight=False,
              soft_wrap=True)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 180, markup=False, emoji=False,
              highlight=False, soft_wrap=True)
STATE = {"debug": False}
T = TypeVar("T")

ResultsOpt = Annotated[Path, typer.Option("--results", help="where study directories live")]


def styled(*parts: str | tuple[str, str]) -> Text:
    """One line from plain strings and (text, style) pairs: the text of each part shown as it is."""
    return Text.assemble(*parts)


def guard(fn: Callable[[], T]) -> T:
    """User errors become one line and an exit code; tracebacks only with --debug."""
    try:
        try:
            return fn()
        except OSError as exc:  # the environment (a full or read-only disk, a permission): one line too
            if STATE["debug"]:
                raise
            raise os_error_line(exc) from None
    except UserError as exc:
        if STATE["debug"]:
            raise
        err.print(styled(("studyctl: error:", "bold red"), " ", str(exc)))
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt as stop:
        err.print(f"studyctl: {getattr(stop, 'reason', 'interrupted')}")
        raise typer.Exit(getattr(stop, "exit_code", 130)) from None
