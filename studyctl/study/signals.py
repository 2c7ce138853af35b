"""SIGTERM and SIGHUP of a running command behave like Ctrl-C: what runs is stopped and recorded CANCELLED.

A terminal closing (SIGHUP), a scheduler or `kill` (SIGTERM), and `sweep cancel` (SIGTERM to the study's
runner) all raise `Interrupted` in the main thread, which every backend's launch handles as Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from studyctl.errors import Interrupted

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    raise Interrupted(f"stopped by {name}", 128 + signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """For the block, SIGTERM and SIGHUP raise `Interrupted` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, _raise) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
