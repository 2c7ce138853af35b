"""What the attempts of a study left on disk, found and opened one way (collect, compare, mlperf and status).

The tree (`attempt.paths`) is listed by `StudyPaths` under its one symlink rule: a symlink is followed
only where it resolves inside the study directory. The same rule holds for the files: a result or error
record that is a symlink out of the study is a reason, never read. Only regular files
are opened (a FIFO could block, a device could be endless), and none larger than MAX_FILE_BYTES.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from studyctl.attempt.paths import AttemptPaths, StudyPaths, attempt_dir_name

# Far above any result file (1024 ranks × 20 checkpoints is ~5 MiB); a larger file is not one of ours.
MAX_FILE_BYTES = 256 << 20
RESULT_NAME, ERROR_NAME = AttemptPaths(Path()).result.name, AttemptPaths(Path()).error.name


@dataclass(frozen=True)
class AttemptFiles:
    """One attempt directory that holds a result or error record (of any file type: judged on reading).

    The files are kept as the scan's strings and made Paths when first asked for: a collect with nothing new
    never asks (a Path per file was a quarter of scanning 10,000 points)."""

    point_id: str
    attempt: int
    result_file: str | None
    error_file: str | None
    # each file's lstat as the scan found it (a symlink's own): what a fingerprint of the tree needs, without
    # a second system call per file; None where the file is absent or the scan did not record it
    result_lstat: os.stat_result | None = field(default=None, compare=False, repr=False)
    error_lstat: os.stat_result | None = field(default=None, compare=False, repr=False)

    @cached_property
    def result(self) -> Path | None:
        return None if self.result_file is None else Path(self.result_file)

    @cached_property
    def error(self) -> Path | None:
        return None if self.error_file is None else Path(self.error_file)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def scan_attempts(paths: StudyPaths) -> dict[str, list[AttemptFiles]]:
    """point_id → its attempts (newest first) that left a result or an error record.

    One lstat per file name of each attempt (`AttemptPaths`' names, tested as plain strings: pathlib was half
    of a scan of 10,000 points), kept for the caller."""
    found: dict[str, list[AttemptFiles]] = {}
    points = os.fspath(paths.points)
    for point_id in paths.point_ids_on_disk():
        attempts = []
        for number in reversed(paths.attempts_on_disk(point_id)):
            base = f"{points}/{point_id}/{attempt_dir_name(number)}/"  # names from the listing: no join needed
            result, error = base + RESULT_NAME, base + ERROR_NAME
            result_st, error_st = _lstat(result), _lstat(error)
            if result_st is not None or error_st is not None:  # any file type: judged on reading
                attempts.append(AttemptFiles(point_id, number, None if result_st is None else result,
                                             None if error_st is None else error, result_st, error_st))
        if attempts:
            found[point_id] = attempts
    return found


def stamp_stat(path: str, scanned: os.stat_result | None) -> os.stat_result | None:
    """The stat of a file the scan found, for a fingerprint: its target's where it is a symlink, its own where
    the target is gone (a dangling link is a stamp too), None where it vanished since."""
    if scanned is not None and not stat.S_ISLNK(scanned.st_mode):
        return scanned  # a regular file (or anything but a link): its lstat is its stat
    try:
        return os.stat(path)
    except OSError:
        return _lstat(path)


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def file_status(path: Path, within: StudyPaths, where: str = "the study", scanned: os.stat_result | None = None
                ) -> tuple[os.stat_result | None, str | None]:
    """(stat, None) for a regular file inside `within` (a symlink to one inside counts); else (None, a reason).

    Nothing is opened here. `where`: what `within` is, for the reason. `scanned`: the file's lstat as
    `scan_attempts` found it; where it is no symlink it is the stat (two system calls per file saved)."""
    try:
        found = scanned if scanned is not None and not stat.S_ISLNK(scanned.st_mode) else _followed(path, within, where)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if isinstance(found, str):
        return None, found
    st = found
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "something else")
        return None, f"{kind}, not a regular file: skipped, never opened"
    if st.st_size > MAX_FILE_BYTES:
        return None, f"{st.st_size} bytes, more than any result file ({MAX_FILE_BYTES >> 20} MiB): never read"
    return st, None


def _followed(path: Path, within: StudyPaths, where: str) -> os.stat_result | str:
    """The stat of `path`, a symlink followed only inside `within`; else the reason it is not followed."""
    if os.path.islink(path):
        target = os.readlink(path)
        if not os.path.exists(path):
            return f"dangling symlink (to {target}): unusable"
        if not within.contains(path):
            return f"a symlink out of {where} (to {target}): never followed"
    return os.stat(path)


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES; OSError for anything else (non-blocking open,
    checked on the descriptor, so a file swapped for a FIFO after `file_status` cannot block us)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file")
        # Plain reads of the size fstat gave (no buffered file object: a tenth of a small file's parse); read on
        # to the end, since the file may have grown since, and stop once past the bound.
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(st.st_size, MAX_FILE_BYTES) + 1 if not chunks else 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                break
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(0, f"more than {MAX_FILE_BYTES >> 20} MiB")
    return data
