"""Figures rendered into their PNGs by forked children while the next figure is built (`rendering`).

Laying out the text and encoding the PNG (matplotlib's Agg and PIL) is most of what a figure costs, and it needs
nothing from the collect once the figure is built: a child forked at that moment renders the very objects this
process built (the same bytes as rendering them here), and several figures render on several cores beside the
tables' writer and the report. Outside `rendering` (tests, compare), or with one core, a figure renders here.
A child that fails makes the block raise, naming the file; its traceback is on stderr. The tables' writer thread
may be running when a child is forked: the child touches only the figure and its own file, and leaves by
`os._exit` (no exit handler, no buffer of this process flushed twice).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path


class Renderer:
    """At most `limit` children at a time; each finished one's `done` runs here (the memo records its file)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running: list[tuple[int, Path, Callable[[], None]]] = []
        self.failed: list[str] = []

    def submit(self, path: Path, write: Callable[[], None], done: Callable[[], None]) -> None:
        while len(self.running) >= self.limit:
            self._reap()
        sys.stdout.flush()
        sys.stderr.flush()  # nothing buffered here is written twice by the child
        pid = os.fork()
        if pid == 0:  # the child: render, then leave without running this process's exit handlers
            code = 1
            try:
                write()
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        self.running.append((pid, path, done))

    def _reap(self) -> None:
        pid, path, done = self.running.pop(0)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
            done()
        else:
            self.failed.append(f"{path.name} (exit {os.waitstatus_to_exitcode(status)})")

    def finish(self) -> None:
        while self.running:
            self._reap()


_ACTIVE: ContextVar[Renderer | None] = ContextVar("renderer", default=None)


def cores() -> int:
    return len(os.sched_getaffinity(0))


@contextmanager
def rendering(limit: int | None = None) -> Iterator[None]:
    """Figures saved inside the block render in children (`limit` at a time: one per core); every child has
    finished, and its file been recorded, when the block ends."""
    limit = cores() if limit is None else limit
    renderer = Renderer(limit) if limit > 1 else None
    token = _ACTIVE.set(renderer)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
        if renderer is not None:
            renderer.finish()
    if renderer is not None and renderer.failed:
        raise RuntimeError(f"rendering failed: {', '.join(renderer.failed)}")


def render(path: Path, write: Callable[[], None], done: Callable[[], None]) -> None:
    """write() renders the figure into `path`; done() runs once it has, here (now, or when its child ends)."""
    renderer = _ACTIVE.get()
    if renderer is None:
        write()
        done()
    else:
        renderer.submit(path, write, done)
