"""Every directory a point writes, from one function, and whether studyctl may remove it.

A point writes `<root>/<study>.<key>/<point_id>` on its filesystem and, tiered, on its node-local tier (there
with a folder per node below). Clean-up, the worker's own and studyctl's after a kill, removes exactly these:
each name below the root is checked to be one plain component, and the walk (`studyctl.removal`, the I/O this
pure module leaves to the kernel) never follows a symbolic link, so no file names (a task.json, a sweep) can point
a removal anywhere else. On an object store (`store` set, root `s3://BUCKET[/PREFIX]`) the place is the key prefix
`<prefix>/<study>.<key>/<point_id>/`: it is never `removable` (no local path is ever derived from it);
`worker.objects.remove_object_place` deletes its objects and aborts its incomplete uploads.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from studyctl.definition.inputs.filesystems import ObjectStoreSpec, is_object_path, object_url_problem
from studyctl.removal import not_plain

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
            if not_plain(value):
                return f"{name} {value!r} is not one plain file name"
        if not POINT_ID.fullmatch(self.point_id):
            return f"point id {self.point_id!r} is not 12 hexadecimal digits"
        if self.store is not None or is_object_path(self.root):
            return object_url_problem(self.root) if self.store is not None and is_object_path(self.root) \
                else f"filesystem path {self.root!r} and its object store settings disagree"
        if not os.path.isabs(self.root):
            return f"filesystem path {self.root!r} is not absolute"
        return None

    @property
    def removable(self) -> bool:
        """A local directory studyctl writes and may remove itself (an object store's place is the worker's to
        delete; a root with "{node}" in it names no one directory)."""
        return self.problem() is None and not self.per_node and self.store is None


def study_dir_name(study: str, key: str) -> str:
    """`<study>.<key>`: the key (of the results directory's path) keeps two studies of one name apart."""
    return f"{study}.{key}" if key else study


def point_places(study_dir: str, point_id: str, filesystem_path: str, tier_path: str | None,
                 store: ObjectStoreSpec | None = None) -> tuple[Place, ...]:
    """Every place a point writes: its directory (or key prefix, on an object store) on the measured filesystem,
    then (tiered) on the tier."""
    shared = Place(filesystem_path, study_dir, point_id, store=store)
    return (shared,) if tier_path is None else (shared, Place(tier_path, study_dir, point_id, node_local=True))
