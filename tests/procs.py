"""Processes of a test's own study, found by their command lines (ranks run in sessions of their own)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def pids_under(root: Path, chosen: Callable[[list[bytes]], bool]) -> list[int]:
    """PIDs whose command line names a path under `root` and passes `chosen` (its argv, as bytes)."""
    needle = str(root.resolve()).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if args and chosen(args) and any(needle in a for a in args):
            pids.append(int(entry.name))
    return pids
