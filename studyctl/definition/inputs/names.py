"""The one rule for names that become file and directory names and table keys: study, model, filesystem.

Sweep files are held to it when read (`definition.planning.sweep`), and so are result files (`analysis.results`):
a received result with a 300-character or '/'-bearing model name is an unusable file, not a plot name
the filesystem refuses halfway through a collect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_RULE = "1-64 letters, digits, '_', '.', '-', starting with a letter or digit"
SHOWN = 40  # characters of a refused name quoted in a message


def is_plain_name(value: object) -> bool:
    return isinstance(value, str) and NAME.fullmatch(value) is not None


def shown(value: object) -> str:
    """A refused value as a message quotes it: repr, cut to SHOWN characters (it may be 300 long)."""
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}…({len(str(value))} characters)"


def plain_name(value: str) -> str:
    """`value` if it follows NAME_RULE; ValueError (pydantic's validator message) otherwise."""
    if not is_plain_name(value):
        raise ValueError(f"{shown(value)} must be {NAME_RULE} (it names files and directories)")
    return value


def name_problem(names: Mapping[str, object]) -> str | None:
    """The first of `names` (what it is → value) that breaks the rule, as one line; None when all follow it."""
    for what, value in names.items():
        if not is_plain_name(value):
            return f"{what} name {shown(value)} is not {NAME_RULE}"
    return None
