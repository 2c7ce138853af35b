"""One runner per study: an advisory lock on `<study>/.lock` that goes with its process (even a kill -9)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from studyctl.attempt.paths import StudyPaths
from studyctl.errors import UserError

T = TypeVar("T")


@contextmanager
def study_lock(paths: StudyPaths) -> Iterator[None]:
    """Held while a command changes the study (submit, resubmit); a second one is refused in one line."""
    paths.root.mkdir(parents=True, exist_ok=True)
    fd = _named(paths, lambda: os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UserError(f"{paths.root}: another studyctl is running this study; wait for it or "
                        "'studyctl sweep cancel' it", 1) from None
    try:
        _named(paths, lambda: _write_pid(fd))
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _named(paths: StudyPaths, op: Callable[[], T]) -> T:
    """`op()`, its OSError naming the lock file (a full or read-only disk is then one line that says where)."""
    try:
        return op()
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(paths.lock)) from exc


def runner_active(paths: StudyPaths) -> bool:
    """True while a runner holds the study (it keeps the ledger current itself)."""
    try:
        fh = paths.lock.open("a+")
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def stop_runner(paths: StudyPaths, timeout_s: float = 300.0) -> bool:
    """SIGTERM the command running the study (its PID is in the lock it holds) and wait for it to let go.

    It stops what it runs and records it, as on Ctrl-C. Returns whether a runner was stopped.
    """
    if not runner_active(paths):
        return False
    try:
        pid = int(paths.lock.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    if pid == os.getpid() or not runner_active(paths):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while runner_active(paths) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True
