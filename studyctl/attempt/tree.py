"""What the attempts of a study left on disk, found and opened one way (collect, compare, mlperf and status).

The tree (`attempt.paths`) is listed by `StudyPaths` under its one symlink rule: a symlink is followed
only where it resolves inside the study directory. The same rule holds for the files: a result or error
record that is a symlink out of the study is a reason, never read. Only regular files
are opened (a FIFO could block, a device could be endless), and none larger than MAX_FILE_BYTES.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from studyctl.attempt.paths import AttemptPaths, StudyPaths

# Far above any result file (1024 ranks × 20 checkpoints is ~5 MiB); a larger file is not one of ours.
MAX_FILE_BYTES = 256 << 20
RESULT_NAME, ERROR_NAME = AttemptPaths(Path()).result.name, AttemptPaths(Path()).error.name


@dataclass(frozen=True)
class AttemptFiles:
    """One attempt directory that holds a result or error record (of any file type: judged on reading)."""

    point_id: str
    attempt: int
    result: Path | None
    error: Path | None


def scan_attempts(paths: StudyPaths) -> dict[str, list[AttemptFiles]]:
    """point_id → its attempts (newest first) that left a result or an error record.

    Each attempt's file names come from `AttemptPaths`, tested as plain strings (pathlib cost a third of a
    scan of 10,000 points); Paths are made only for the files found."""
    found: dict[str, list[AttemptFiles]] = {}
    for point_id in paths.point_ids_on_disk():
        attempts = []
        for number in reversed(paths.attempts_on_disk(point_id)):
            files = paths.attempt(point_id, number)
            folder = os.fspath(files.dir)
            result, error = (os.path.join(folder, name) for name in (RESULT_NAME, ERROR_NAME))
            attempts.append(AttemptFiles(point_id, number,  # any file type: judged on reading
                                         Path(result) if os.path.lexists(result) else None,
                                         Path(error) if os.path.lexists(error) else None))
        if attempts := [a for a in attempts if a.result or a.error]:
            found[point_id] = attempts
    return found


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def file_status(path: Path, within: StudyPaths, where: str = "the study") -> tuple[os.stat_result | None, str | None]:
    """(stat, None) for a regular file inside `within` (a symlink to one inside counts); else (None, a reason).

    Nothing is opened here. `where`: what `within` is, for the reason."""
    try:
        if os.path.islink(path):
            target = os.readlink(path)
            if not os.path.exists(path):
                return None, f"dangling symlink (to {target}): unusable"
            if not within.contains(path):
                return None, f"a symlink out of {where} (to {target}): never followed"
        st = os.stat(path)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "something else")
        return None, f"{kind}, not a regular file: skipped, never opened"
    if st.st_size > MAX_FILE_BYTES:
        return None, f"{st.st_size} bytes, more than any result file ({MAX_FILE_BYTES >> 20} MiB): never read"
    return st, None


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES; OSError for anything else (non-blocking open,
    checked on the descriptor, so a file swapped for a FIFO after `file_status` cannot block us)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(0, f"more than {MAX_FILE_BYTES >> 20} MiB")
    return data
