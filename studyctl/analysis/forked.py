"""Output work handed to forked children while this process goes on (`forking`, `in_child`).

A collect's outputs need nothing from it once they are built: laying out a figure's text and encoding its PNG
(matplotlib's Agg and PIL) is most of what a figure costs, and the tables are written from frames already made.
Inside `forking` such work is queued; when the block's owner calls `start` (or the block ends), the queue is split
over one child per core, forked at that moment, which work on the very objects this process built (the same bytes as
working here), while this process makes the report. Outside `forking` (tests, compare), with one core, or where no
child can be forked, the work runs here. A child's failed work makes the block raise: a system error (a full disk)
as it would have been raised here, else naming the file, the traceback on stderr.

Forks are few (a collect forks one writer of its tables, then one renderer per core once every figure is built): a
child of a process holding a large study's rows costs its page tables and every page either side then writes (copy
on write), so one fork per figure cost more CPU than it saved. The cycle collector would write to every object it
walks, on either side: the objects made before a fork are frozen out of its walks (`gc.freeze`, as Python's
documentation advises for fork) and the child collects nothing; it frees all on exit. A fork copies only the thread
that forks, and a lock another thread held at that moment stays held in the child for ever: this process runs no
thread of its own here, and the libraries' pools (Arrow's, BLAS's) are idle between calls and re-made in a child by
their fork handlers; where the caller runs threads of its own (the library API in a threaded program), nothing is
forked and the work runs here. A child touches only its objects and their files, and leaves by `os._exit` (no exit
handler run, no buffer of this process flushed twice).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Job:
    path: Path  # what the work makes (named if it fails)
    work: Callable[[], object]
    done: Callable[[], None]  # run here once the work has succeeded


class Children:
    """Queued jobs, run by at most `limit` children forked at `start`; each succeeded job's `done` runs here."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.queued: list[Job] = []
        self.running: list[tuple[int, int, list[Job]]] = []  # pid, the read end of its report pipe, its jobs
        self.failed: list[str] = []
        self.error: OSError | None = None  # the first system error (a full disk) a job met in its child

    def submit(self, job: Job) -> None:
        self.queued.append(job)

    def start(self) -> None:
        """Fork the children for every job queued so far, dealt round robin (queue the longest first)."""
        groups = [self.queued[i::self.limit] for i in range(min(self.limit, len(self.queued)))]
        self.queued = []
        for jobs in groups:
            self._fork(jobs)

    def _fork(self, jobs: list[Job]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()  # nothing buffered here is written twice by the child
        read, write = os.pipe()
        gc.freeze()  # every object so far out of the collector's walks, here and in the child (`finish` undoes it)
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a limit on processes or memory): the work is done here
            os.close(read)
            os.close(write)
            for job in jobs:
                job.work()
                job.done()
            return
        if pid == 0:  # the child: each job, one report line each, then leave without this process's exit handlers
            code = 0
            try:
                gc.disable()
                os.close(read)
                for i, job in enumerate(jobs):
                    try:
                        job.work()
                        report: dict[str, Any] = {"done": i}
                    except OSError as exc:  # the environment (a full disk): told as this process would tell it
                        name = exc.filename  # a str, bytes, a descriptor's number or None
                        report = {"failed": i, "errno": exc.errno, "strerror": exc.strerror,
                                  "filename": os.fsdecode(name) if isinstance(name, bytes) else name}
                        code = 1
                    except BaseException:
                        traceback.print_exc()  # a fault of studyctl's: its traceback
                        report = {"failed": i}
                        code = 1
                    os.write(write, json.dumps(report).encode() + b"\n")
            finally:
                os._exit(code)
        os.close(write)
        self.running.append((pid, read, jobs))

    def finish(self) -> None:
        """Start what is queued, wait for every child, run `done` for each job reported done, name the rest (and
        keep the first system error a job met, to be raised as this process would have raised it)."""
        self.start()
        for pid, read, jobs in self.running:
            with os.fdopen(read, "rb") as pipe:
                reports = [json.loads(line) for line in pipe.read().splitlines()]
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            done = {r["done"] for r in reports if "done" in r}
            for i, job in enumerate(jobs):
                if i in done:
                    job.done()
                else:
                    self.failed.append(f"{job.path.name} (exit {code})")
            errors = [r for r in reports if r.get("errno") is not None]
            if errors and self.error is None:
                e = errors[0]
                self.error = OSError(e["errno"], e["strerror"], e["filename"])
        self.running = []
        gc.unfreeze()


_ACTIVE: ContextVar[Children | None] = ContextVar("forked_children", default=None)


def cores() -> int:
    return len(os.sched_getaffinity(0))


@contextmanager
def forking(limit: int | None = None) -> Iterator[Children | None]:
    """Work handed to `in_child` inside the block is queued for children (`limit` of them: one per core), forked
    when the caller calls `start()` on what this yields, or when the block ends; every child has finished, and
    its jobs' `done` run, when the block ends. Yields None where the work runs here (one core, or other threads
    running in this process)."""
    limit = cores() if limit is None else limit
    alone = threading.active_count() == 1  # a caller's own threads (the library API in a threaded program): no fork
    children = Children(limit) if limit > 1 and alone else None
    token = _ACTIVE.set(children)
    try:
        yield children
    except BaseException:
        if children is not None:
            children.queued.clear()  # the block failed: nothing more is started, what runs is waited for
        raise
    finally:
        _ACTIVE.reset(token)
        if children is not None:
            children.finish()
    if children is not None and children.error is not None:
        raise children.error
    if children is not None and children.failed:
        raise RuntimeError(f"making outputs failed: {', '.join(children.failed)}")


def in_child(path: Path, work: Callable[[], object], done: Callable[[], None]) -> None:
    """work() makes `path`; done() runs once it has, here (now, or when its child has ended)."""
    children = _ACTIVE.get()
    if children is None:
        work()
        done()
    else:
        children.submit(Job(path, work, done))
