"""Where a study writes: a named filesystem's path and declared kind."""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

UNSET_VAR = re.compile(r"\$(\w+|\{[^}]*\})")


# A filesystem's declared kind and the mount types (/proc/self/mountinfo) that may carry it: the worker
# refuses to measure a `kind: lustre` path that is really the root disk. `local` is any node-local
# filesystem; `memory` is RAM (its reads are never cold).
FILESYSTEM_KINDS: dict[str, tuple[str, ...]] = {
    "lustre": ("lustre",), "gpfs": ("gpfs",), "nfs": ("nfs", "nfs4"), "beegfs": ("beegfs",),
    "cephfs": ("ceph", "fuse.ceph", "fuse.ceph-fuse"), "weka": ("wekafs",), "daos": ("fuse.dfuse", "fuse.daos"),
    "local": ("ext4", "xfs", "btrfs", "zfs", "ext3", "f2fs", "overlay", "tmpfs"),
    "ext4": ("ext4",), "xfs": ("xfs",), "btrfs": ("btrfs",), "zfs": ("zfs",),
    "memory": ("tmpfs", "ramfs"),
}


# In a tier's path, each node's name ("/local/{node}"): the directories it names are studyctl's to make.
NODE = "{node}"


def must_exist(path: str) -> str:
    """The part of a filesystem path that must exist before anything runs (studyctl never creates it): the whole
    path, or the directory above the first component that names the node."""
    parts = PurePosixPath(path).parts
    per_node = [i for i, part in enumerate(parts) if NODE in part]
    return str(PurePosixPath(*parts[:per_node[0]])) if per_node else path


def kind_problem(directory: str, fstype: str, kind: str | None) -> str | None:
    """Why a `kind:` declared for `directory` is not the mount type it is on (None: it is, or none declared)."""
    accepted = FILESYSTEM_KINDS.get(kind or "", ())
    if kind is None or fstype in accepted:
        return None
    return f"{directory} is on a {fstype} mount, not kind {kind} (kind {kind} accepts: {', '.join(accepted)})"


class FilesystemSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    description: str | None = None
    kind: Literal[tuple(FILESYSTEM_KINDS)] | None = None  # type: ignore[valid-type]
    # The vendor's stated peak (GiB/s, 2^30 B/s): the report gives each cell's "% of stated peak" beside it.
    peak_GiBps: float | None = Field(None, gt=0, allow_inf_nan=False)

    @field_validator("path")
    @classmethod
    def _expand(cls, value: str) -> str:
        """`~` and `$VARS` expand where the sweep is loaded (the submitting user's environment)."""
        path = os.path.expanduser(os.path.expandvars(value))
        unset = UNSET_VAR.search(path)
        if unset:
            raise ValueError(f"{value!r}: environment variable {unset.group(1).strip('{}')} is not set")
        if not os.path.isabs(path):
            raise ValueError(f"{value!r} must be an absolute path (workers may start in another directory)")
        return path
