"""A directory a command rewrites whole (`mlperf --out DIR`), replaced so that it is complete at every instant.

DIR is a symbolic link to a versioned tree beside it, `.DIR.<id>.tree`. A new tree is built beside the old one,
a link to it is made beside DIR (`.DIR.<id>.link`) and renamed onto DIR: one atomic rename, so a reader, or a
kill -9 at any instant, finds DIR complete, old or new. The old tree goes afterwards. Trees and links a killed
run left behind are removed by the next run, which holds `.DIR.studyctl-lock` meanwhile (never another live
run's): only names of these patterns (and the `.DIR.<id>.tmp` / `.old` of earlier versions), each a real
directory or a link as expected, and never by following a link.

A DIR that is still a real directory (written by an earlier version, or made empty by the user) is exchanged
with the new link by renameat2(RENAME_EXCHANGE), also atomic; a filesystem without it gets the old directory
moved aside first, the one replacement with an instant where DIR is missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def step(name: str) -> None:
    """A named instant of a replacement ("started", "built", "linked", "swapped"): where a test kills it."""


def _ours(name: str) -> re.Pattern[str]:
    """Every name studyctl makes beside DIR for DIR's sake: its trees, links, and earlier versions' temporaries."""
    return re.compile(rf"\.{re.escape(name)}\.(?:[0-9a-f]{{16}}\.(?:tree|link|old)|[0-9a-f]{{8}}\.(?:tmp|old))")


def current_tree(out: Path) -> Path | None:
    """The tree DIR links to, where DIR is a link studyctl made (to one of its tree names beside DIR)."""
    try:
        target = os.readlink(out)
    except OSError:
        return None
    return out.parent / target if _ours(out.name).fullmatch(target) and target.endswith(".tree") else None


@contextlib.contextmanager
def replaced(out: Path) -> Iterator[Path]:
    """A new, empty tree to build in; when the block ends without an exception, DIR is it (and the old is gone).

    An exception (or a kill) before then leaves DIR as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out):
        _remove_stale(out)
        ident = uuid.uuid4().hex[:16]
        tree = out.parent / f".{out.name}.{ident}.tree"
        tree.mkdir()
        step("started")
        try:
            yield tree
        except BaseException:
            _remove(tree)
            raise
        step("built")
        link = out.parent / f".{out.name}.{ident}.link"
        os.symlink(tree.name, link)
        step("linked")
        old = current_tree(out)
        if out.is_symlink() or not os.path.lexists(out):
            os.replace(link, out)
        else:
            old = _exchange(link, out, out.parent / f".{out.name}.{ident}.old")
        step("swapped")
        if old is not None:
            _remove(old)


def _exchange(link: Path, out: Path, aside: Path) -> Path:
    """Put `link` at the real directory `out`; returns where the old directory now is."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(link), _AT_FDCWD, os.fsencode(out), _RENAME_EXCHANGE) == 0:
            return link
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(out))
    os.rename(out, aside)
    os.replace(link, out)
    return aside


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """One run at a time replaces DIR: what a run finds beside it that DIR does not link to is a killed run's."""
    fd = os.open(out.parent / f".{out.name}.studyctl-lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_stale(out: Path) -> None:
    keep, pattern = current_tree(out), _ours(out.name)
    for entry in os.scandir(out.parent):
        if pattern.fullmatch(entry.name) and out.parent / entry.name != keep:
            _remove(out.parent / entry.name)


def _remove(path: Path) -> None:
    """A link (never followed) or a real directory (rmtree follows no link inside it); anything else stays."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        path.unlink(missing_ok=True)
    elif stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
