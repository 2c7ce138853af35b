"""What `plan` says about disk and memory: the lines of what will not fit, on stderr."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text


def print_capacity(err: Console, sweep: Any, summary: Any, backend: str) -> list[str]:
    """Print each capacity problem and note (what was not checked, DLIO's memory); return the problems."""
    from studyctl.api import plan_capacity

    problems, notes = plan_capacity(sweep, summary, backend)
    for line in problems:
        err.print(Text.assemble(("will not fit:", "bold yellow"), " ", line))
    for line in notes:
        err.print(f"note: {line}")
    return problems
