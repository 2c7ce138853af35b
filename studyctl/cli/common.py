"""What every command shares: the consoles, the error guard, common options."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from studyctl.errors import UserError, os_error_line

# Wide when piped (CI logs, files); the terminal's width otherwise.
out = Console(width=None if sys.stdout.isatty() else 180)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 180)
STATE = {"debug": False}
T = TypeVar("T")

ResultsOpt = Annotated[Path, typer.Option("--results", help="where study directories live")]


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
        err.print(f"[bold red]studyctl: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt as stop:
        err.print(f"studyctl: {getattr(stop, 'reason', 'interrupted')}", highlight=False)
        raise typer.Exit(getattr(stop, "exit_code", 130)) from None
