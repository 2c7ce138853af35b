"""The one way studyctl removes a directory it wrote: by file descriptors, below a root, never through a link.

A point's place is `<root>/<study_dir>/<point_id>` (a folder per node below it on a shared view of node tiers).
Its names come from files a received study directory holds (task.json, the ledger), so each is checked to be
one plain component, and every step below the root opens with O_NOFOLLOW: nothing planted can point a removal
elsewhere. Which place to remove, and whether it is one studyctl writes, is the definition's (`Place`); this
module only acts, so the definition stays pure.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Protocol


class RemovablePlace(Protocol):
    """What a removal needs of a place (`definition.checkpoint.places.Place` is one)."""

    @property
    def root(self) -> str: ...
    @property
    def study_dir(self) -> str: ...
    @property
    def point_id(self) -> str: ...
    @property
    def node_local(self) -> bool: ...
    @property
    def removable(self) -> bool:
        """A local directory studyctl writes: plain names, an absolute root with no "{node}" left, no store."""
        ...


def remove_place(place: RemovablePlace, node_dir: str | None = None) -> bool:
    """Remove `place`, or only its folder of one node (`node_dir`), and what is left empty above it (the claim
    file of a data directory too). Never follows a symbolic link below the root; False if there was nothing to
    remove or it is not a directory studyctl made (a link, a file, a name that is not plain)."""
    if not place.removable or (node_dir is not None and not_plain(node_dir)):
        return False
    try:
        root_fd = os.open(place.root, os.O_RDONLY | os.O_DIRECTORY)  # the sweep's mount path: may be a link
    except OSError:
        return False
    try:
        try:
            study_fd = os.open(place.study_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
        except OSError:
            return False
        try:
            removed = _remove_in(study_fd, place.point_id, node_dir)
            if not place.node_local:
                with contextlib.suppress(OSError):
                    os.unlink(f".{place.point_id}.lock", dir_fd=study_fd)
        finally:
            os.close(study_fd)
        with contextlib.suppress(OSError):
            os.rmdir(place.study_dir, dir_fd=root_fd)  # the study's, once its last point is gone
        return removed
    finally:
        os.close(root_fd)


def not_plain(name: str) -> bool:
    """Not one plain file name: empty, `.`, `..`, or with a slash or a NUL in it."""
    return not name or name in (".", "..") or "/" in name or "\0" in name


def _remove_in(study_fd: int, point_id: str, node_dir: str | None) -> bool:
    if node_dir is None:
        return _remove_dir_in(study_fd, point_id)
    try:
        point_fd = os.open(point_id, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=study_fd)
    except OSError:
        return False
    try:
        removed = _remove_dir_in(point_fd, node_dir)
    finally:
        os.close(point_fd)
    with contextlib.suppress(OSError):
        os.rmdir(point_id, dir_fd=study_fd)  # the point's, once its last node's folder is gone
    return removed


def _remove_dir_in(dir_fd: int, name: str) -> bool:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):  # a link (or anything else) planted where the point's directory goes
        return False
    _remove_tree_at(dir_fd, name)
    return True


def _remove_tree_at(parent_fd: int, name: str) -> None:
    """`rm -rf` of `name` in the directory `parent_fd`, by file descriptors: a link is removed, never followed
    (what shutil.rmtree does with dir_fd from Python 3.11)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    except OSError:  # a file or a link
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=parent_fd)
        return
    try:
        with os.scandir(fd) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for child, is_dir in names:
            if is_dir:
                _remove_tree_at(fd, child)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=parent_fd)
