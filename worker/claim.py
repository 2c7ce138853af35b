"""Where the worker may write: the filesystems the sweep names (shared and tier), and a point directory no other
live run writes.

Both checks run on rank 0 before the first byte; every backend gets them because the worker does them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from studyctl import host
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.inputs.filesystems import kind_problem, must_exist


def misplacement(path: str, kind: str | None) -> tuple[str, str] | None:
    """Why `path` is not the filesystem the sweep names, as (its key, the reason), or None. Never creates the
    path: a missing mount point would silently become a directory on the root disk. A per-node tier path
    ("/local/{node}") is checked above the node's own directory, which studyctl makes."""
    root = must_exist(path)
    if not os.path.isdir(root):
        return "path", f"{root} does not exist or is not a directory (studyctl never creates it, only its own " \
                       "directories below it)"
    problem = kind_problem(root, host.mount_of(root)["fstype"], kind)
    return ("kind", problem) if problem else None


def placement_problem(path: str, kind: str | None) -> str | None:
    """`misplacement` in one line, for the worker's error record."""
    wrong = misplacement(path, kind)
    return f"filesystem path {wrong[1]}" if wrong else None


def _open_claim_file(task: WorkerTask, tries: int = 50) -> int:
    """Create the study's data directory and the claim file in it. Another point of the study that ends
    removes the data directory when it looks empty (release below): between our mkdir and our open it may
    vanish, so both are retried; once the claim file exists the directory is no longer empty."""
    path = task.claim_file
    for _ in range(tries - 1):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except (FileNotFoundError, FileExistsError):  # pathlib: "exists" then gone before its is_dir check
            continue
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


# The claim on this process's point directory, held until the process ends (rank 0 only).
CLAIMS: list[int] = []


def claim(task: WorkerTask) -> str | None:
    """Rank 0: hold the point's claim file (flock) for the whole run; why not, if another live run holds it."""
    fd = _open_claim_file(task)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        return f"{task.data_dir} is being written by a live run ({holder}); a second writer would corrupt both"
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"study {task.study} attempt {task.attempt} pid {os.getpid()} on {os.uname().nodename}".encode(), 0)
    CLAIMS.append(fd)
    return None


def release(task: WorkerTask) -> None:
    """Rank 0, at the end: drop the claim file (and the study's data directory if nothing else is in it)."""
    while CLAIMS:
        task.claim_file.unlink(missing_ok=True)
        os.close(CLAIMS.pop())
        with contextlib.suppress(OSError):
            task.data_dir.parent.rmdir()
