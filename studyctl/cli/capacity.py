"""What `plan` says about disk and memory: the lines of what will not fit, on stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from studyctl.api import Plan


def print_capacity(err: Console, plan: Plan) -> list[str]:
    """Print each capacity problem and note (what was not checked, DLIO's memory); return the problems."""
    problems, notes = plan.capacity()
    for line in problems:
        err.print(Text.assemble(("will not fit:", "bold yellow"), " ", line))
    for line in notes:
        err.print(f"note: {line}")
    return problems
