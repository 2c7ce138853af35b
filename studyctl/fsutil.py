"""Atomic file writes (readers see the old file or the new one, never a torn one) and the output
directories studyctl owns inside a study (real directories, never a symlink to somewhere else).

A write goes to a fresh temporary file beside the target (O_EXCL, a random name: two writers never share
one, and a planted symlink is never followed), is fsynced, then renamed over the target: a symlink at
the target itself is replaced, never written through. The file gets the mode a plain `open()` would
give it (0666 less the umask), so a team's shared results tree stays readable.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from studyctl.errors import UserError

TEMP_SUFFIX = ".tmp"  # every temporary file is `.<name>.<random>.tmp`: hidden, and never a .png/.csv itself


def current_umask() -> int:
    """The process umask, read without changing it where Linux tells (/proc); else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def is_temporary(name: str) -> bool:
    """A temporary file of an atomic write (ours or another process's): never an output to keep or sweep."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


@contextmanager
def atomic_open(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that becomes `path` when the block ends without an exception (and vanishes otherwise).

    An OSError names `path` (not the temporary file), e.g. for a full disk's one line.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write, fsync, rename (creating the parent directory if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def owned_dir(root: Path, path: Path, create: bool = True) -> Path:
    """`path`, a directory studyctl writes inside the study `root`, made (if missing) as real directories
    (`create=False`: only checks what exists, for a refusal before any work).

    Every component below `root` must be a real directory (or absent): a symlink there could send the
    writes, and collect's clean-up of stale plots, into someone else's directory. UserError (exit 2),
    naming the path, otherwise. `root` itself may be a symlink: where the study lives is the user's choice.
    """
    rel = path.relative_to(root)
    if ".." in rel.parts:
        raise UserError(f"{path}: outside the study directory {root}")
    current = root
    for part in rel.parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if not create:
                return path
            with contextlib.suppress(FileExistsError):  # another process made it meanwhile: judged below
                current.mkdir()
            st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode):
            raise UserError(f"{current}: is a symlink (to {os.readlink(current)}); studyctl writes its outputs "
                            "only into real directories inside the study: move the link away and run it again")
        if not stat.S_ISDIR(st.st_mode):
            raise UserError(f"{current}: not a directory; studyctl writes its outputs into a directory there: "
                            "move it away and run it again")
    return path
