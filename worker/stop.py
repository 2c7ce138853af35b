"""SIGTERM of a rank (a time limit, scancel, a stopped studyctl): its node's tier folder goes before it exits.

The tier is node-local (often RAM) and only its node reaches it, so each rank clears its node's folder of the
point itself when told to stop. A rank blocked in MPI runs the handler only once it is back in Python; one
killed outright cannot: studyctl's clean-up (after the ranks are gone) covers both.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from studyctl.definition.checkpoint.places import Place
from studyctl.removal import remove_place

OWNED: list[tuple[Place, str]] = []  # (the tier place on this node, this node's folder in it), once made


def own(place: Place, node_dir: str) -> None:
    OWNED.append((place, node_dir))


def disown() -> None:
    OWNED.clear()


def _on_term(signum: int, frame: FrameType | None) -> None:
    for place, node_dir in OWNED:
        remove_place(place, node_dir=node_dir)
    os._exit(128 + signum)


@contextmanager
def tier_removed_on_sigterm() -> Iterator[None]:
    """For the run: SIGTERM removes the owned tier folders and ends the rank (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before: Any = signal.signal(signal.SIGTERM, _on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
        disown()
