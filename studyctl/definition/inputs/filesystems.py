"""Where a study writes: a named filesystem's path and declared kind, or an S3 bucket (kind s3).

An S3 filesystem's `path` is `s3://BUCKET[/PREFIX]`; the study adds `<study>.<key>/<point>/<step>/<file>` below
it, so DLIO's file names are the keys. There is no credential field: the client takes the standard environment
and profile chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...), so no secret is ever in a sweep, a task or a result.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from studyctl.objstore.target import masked

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
    "s3": (),  # an object store: no mount (its `path` is s3://BUCKET[/PREFIX])
}
OBJECT_KINDS = ("s3",)
S3_SCHEME = "s3://"
Addressing = Literal["path", "virtual"]
# S3's bucket naming rules (3-63 of lower-case letters, digits, '.', '-'; a letter or digit at each end).
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
ENDPOINT = re.compile(r"https?://[^\s/@]+(:\d+)?/?")
# Fields that only an object store has, with their defaults (set on another kind: refused in one line).
OBJECT_FIELDS = ("endpoint", "region", "addressing")


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


def is_object_path(path: str) -> bool:
    """Whether a filesystem path names an object store (s3://...), not a directory."""
    return path.startswith(S3_SCHEME)


def object_url_problem(url: str) -> str | None:
    """Why `url` is not `s3://BUCKET[/PREFIX]` (one line), or None."""
    bucket, _, prefix = url[len(S3_SCHEME):].partition("/")
    if not BUCKET.fullmatch(bucket):
        return (f"{url!r}: bucket {bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, '.', '-'; "
                "form s3://BUCKET[/PREFIX])")
    if any(part in ("", ".", "..") for part in prefix.rstrip("/").split("/")) and prefix.rstrip("/"):
        return f"{url!r}: prefix {prefix!r} has an empty, '.' or '..' component"
    return None


class ObjectStoreSpec(BaseModel):
    """How to reach an object store (what the worker needs besides the URL): never a credential."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str | None = None  # None: the SDK's default (AWS)
    region: str = "us-east-1"
    addressing: Addressing = "path"


class FilesystemSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    description: str | None = None
    kind: Literal[tuple(FILESYSTEM_KINDS)] | None = None  # type: ignore[valid-type]
    # The vendor's stated peak (GiB/s, 2^30 B/s): the report gives each cell's "% of stated peak" beside it.
    peak_GiBps: float | None = Field(None, gt=0, allow_inf_nan=False)
    # kind s3 only: the endpoint URL (default: the SDK's, AWS), region and addressing style (path | virtual)
    endpoint: str | None = None
    region: str = Field("us-east-1", pattern=r"^[a-z0-9-]{1,32}$")
    addressing: Addressing = "path"

    @field_validator("path")
    @classmethod
    def _expand(cls, value: str) -> str:
        """`~` and `$VARS` expand where the sweep is loaded (the submitting user's environment)."""
        path = os.path.expandvars(value)
        path = path if is_object_path(path) else os.path.expanduser(path)
        unset = UNSET_VAR.search(path)
        if unset:
            raise ValueError(f"{value!r}: environment variable {unset.group(1).strip('{}')} is not set")
        if is_object_path(path):
            problem = object_url_problem(path)
            if problem:
                raise ValueError(problem)
            return path.rstrip("/")
        if not os.path.isabs(path):
            raise ValueError(f"{value!r} must be an absolute path (workers may start in another directory)")
        return path

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        """An endpoint URL: scheme, host and port only (credentials in a URL are refused, never stored)."""
        if value is None:
            return None
        value = os.path.expandvars(value)
        unset = UNSET_VAR.search(value)
        if unset:  # e.g. STUDYCTL_S3_ENDPOINT before `source /tmp/studyctl-s3/env`
            raise ValueError(f"environment variable {unset.group(1).strip('{}')} is not set")
        if not ENDPOINT.fullmatch(value):
            raise ValueError(f"{masked(value)!r} is not an endpoint URL (http[s]://HOST[:PORT], no user, password "
                             "or path)")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _object_store(self) -> FilesystemSpec:
        """kind s3 and an s3:// path go together; the object store's fields belong to kind s3 alone."""
        if self.kind in OBJECT_KINDS and not is_object_path(self.path):
            raise ValueError(f"path: kind {self.kind} needs path s3://BUCKET[/PREFIX], not {self.path!r}")
        if self.kind not in OBJECT_KINDS:
            if is_object_path(self.path):
                raise ValueError(f"kind: path {self.path!r} is an object store: set kind: s3")
            extra = sorted(set(OBJECT_FIELDS) & self.model_fields_set)
            if extra:
                raise ValueError(f"{extra[0]}: only a filesystem of kind s3 has it (this one is kind "
                                 f"{self.kind or 'undeclared'})")
        return self

    @property
    def object_store(self) -> ObjectStoreSpec | None:
        """How the worker reaches this filesystem's objects (None: a POSIX filesystem)."""
        if self.kind not in OBJECT_KINDS:
            return None
        return ObjectStoreSpec(endpoint=self.endpoint, region=self.region, addressing=self.addressing)
