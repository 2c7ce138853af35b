"""Output work handed to forked children while this process goes on (`forking`, `in_child`).

A collect's outputs need nothing from it once they are built: a figure laid out and encoded into its PNG
(matplotlib's Agg and PIL, most of what a figure costs), the tables written as CSV and Parquet. A child forked at
that moment works on the very objects this process built (the same bytes as doing it here), while this process
builds the next figure and makes the report: the work runs on as many cores as there are. Outside `forking`
(tests, compare), or with one core, the work runs here. A child that fails makes the block raise, naming what it
was making; its traceback is on stderr.

A fork copies only the thread that forks, and a lock another thread held at that moment stays held in the child
for ever. So inside `forking` this process runs no thread of its own; the libraries' pools (Arrow's, BLAS's) are
idle between calls and re-made in a child by their fork handlers. A child touches only its objects and its own
files, and leaves by `os._exit` (no exit handler run, no buffer of this process flushed twice).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path


class Children:
    """At most `limit` children at a time; each finished one's `done` runs here (a memo records its file)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running: list[tuple[int, Path, Callable[[], None]]] = []
        self.failed: list[str] = []

    def submit(self, path: Path, work: Callable[[], object], done: Callable[[], None]) -> None:
        while len(self.running) >= self.limit:
            self._reap()
        sys.stdout.flush()
        sys.stderr.flush()  # nothing buffered here is written twice by the child
        pid = os.fork()
        if pid == 0:  # the child: work, then leave without running this process's exit handlers
            code = 1
            try:
                work()
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


_ACTIVE: ContextVar[Children | None] = ContextVar("forked_children", default=None)


def cores() -> int:
    return len(os.sched_getaffinity(0))


@contextmanager
def forking(limit: int | None = None) -> Iterator[None]:
    """Work handed to `in_child` inside the block runs in children (`limit` at a time: one per core); every
    child has finished, and its `done` run, when the block ends."""
    limit = cores() if limit is None else limit
    children = Children(limit) if limit > 1 else None
    token = _ACTIVE.set(children)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
        if children is not None:
            children.finish()
    if children is not None and children.failed:
        raise RuntimeError(f"making outputs failed: {', '.join(children.failed)}")


def in_child(path: Path, work: Callable[[], object], done: Callable[[], None]) -> None:
    """work() makes `path`; done() runs once it has, here (now, or when its child ends)."""
    children = _ACTIVE.get()
    if children is None:
        work()
        done()
    else:
        children.submit(path, work, done)
