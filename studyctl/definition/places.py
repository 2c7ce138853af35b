"""Every directory a point writes, from one function, and the one way studyctl removes one.

A point writes `<root>/<study>.<key>/<point_id>` on its filesystem and, tiered, on its node-local tier (there
with a folder per node below). Clean-up, the worker's own and studyctl's after a kill, removes exactly these:
each name below the root is checked to be one plain component, and the walk never follows a symbolic link,
so no file names (a task.json, a sweep) can point a removal anywhere else.
On an object store (`store` set, root `s3://BUCKET[/PREFIX]`) the place is the key prefix
`<prefix>/<study>.<key>/<point_id>/`: `remove_place` never touches it (no local path is ever derived from it);
`worker.objects.remove_object_place` deletes its objects and aborts its incomplete uploads.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from studyctl.definition.filesystems import ObjectStoreSpec, is_object_path, object_url_problem

NODE = "{node}"  # in a tier path: the node's name (each node has its own tier)
POINT_ID = re.compile(r"[0-9a-f]{12}")


@dataclass(frozen=True)
class Place:
    """One directory a point writes: `<root>/<study_dir>/<point_id>`. `root` is the filesystem's path as the
    sweep names it; with "{node}" in it, there is one such directory on every node."""

    root: str
    study_dir: str
    point_id: str
    node_local: bool = False
    # an object store's endpoint, region, addressing (root: s3://...): how to reach the place, not which place it is
    # (a server that moved to another port is the same place: the study's current sweep says where it is now)
    store: ObjectStoreSpec | None = field(default=None, compare=False)

    @property
    def object_key(self) -> str:
        """On an object store: the point's key prefix below the root's (`<study>.<key>/<point_id>/`)."""
        return f"{self.study_dir}/{self.point_id}/"

    @property
    def path(self) -> Path:
        return Path(self.root) / self.study_dir / self.point_id

    @property
    def claim_file(self) -> Path:
        """Held (flock) by the attempt writing `path`: a second live writer is refused, never interleaved."""
        return Path(self.root) / self.study_dir / f".{self.point_id}.lock"

    @property
    def per_node(self) -> bool:
        return NODE in self.root

    def on_node(self, node_dir: str) -> Place:
        """This place on one node ("{node}" in the root becomes `node_dir`)."""
        return Place(self.root.replace(NODE, node_dir), self.study_dir, self.point_id, self.node_local, self.store)

    def problem(self) -> str | None:
        """Why this is not a directory studyctl writes (a name that is not one plain component), or None."""
        for name, value in (("study directory", self.study_dir), ("point id", self.point_id)):
            if _not_plain(value):
                return f"{name} {value!r} is not one plain file name"
        if not POINT_ID.fullmatch(self.point_id):
            return f"point id {self.point_id!r} is not 12 hexadecimal digits"
        if self.store is not None or is_object_path(self.root):
            return object_url_problem(self.root) if self.store is not None and is_object_path(self.root) \
                else f"filesystem path {self.root!r} and its object store settings disagree"
        if not os.path.isabs(self.root):
            return f"filesystem path {self.root!r} is not absolute"
        return None


def study_dir_name(study: str, key: str) -> str:
    """`<study>.<key>`: the key (of the results directory's path) keeps two studies of one name apart."""
    return f"{study}.{key}" if key else study


def point_places(study_dir: str, point_id: str, filesystem_path: str, tier_path: str | None,
                 store: ObjectStoreSpec | None = None) -> tuple[Place, ...]:
    """Every place a point writes: its directory (or key prefix, on an object store) on the measured filesystem,
    then (tiered) on the tier."""
    shared = Place(filesystem_path, study_dir, point_id, store=store)
    return (shared,) if tier_path is None else (shared, Place(tier_path, study_dir, point_id, node_local=True))


def remove_place(place: Place, node_dir: str | None = None) -> bool:
    """Remove `place` (with no "{node}" left in its root), or only its folder of one node (`node_dir`), and
    what is left empty above it (the claim file of a data directory too). Never follows a symbolic link below
    the root; False if there was nothing to remove or it is not a directory studyctl made (a link, a file, a
    name that is not plain)."""
    if place.problem() or place.per_node or place.store is not None or (node_dir is not None and _not_plain(node_dir)):
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


def _not_plain(name: str) -> bool:
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
