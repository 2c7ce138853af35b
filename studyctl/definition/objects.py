"""What a point on an object store (a filesystem of kind s3) asks of it, and what it cannot do there (pure). A point
writes one object per DLIO file: at or below `part_mib` one PUT, above it a multipart upload (CreateMultipartUpload,
one UploadPart per part, CompleteMultipartUpload: counted put 2 + parts, as `studyctl.objstore.counts.RequestCounts`
counts them). A restore reads every object with ranged GETs of `part_mib` each (restore broadcast: a group's root
reads the replicated objects a block_mib chunk at a time, each chunk broadcast as it lands, so below part_mib its
GETs are one per block). O_DIRECT and page-cache eviction have no meaning for an object store: its reads are cold on
the client (no client cache: every byte crosses the network from the server); the server's own cache is the
server's. So an object point runs io_mode buffered and cold_read auto, and anything else is refused at plan time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from studyctl.definition.filesystems import FilesystemSpec, ObjectStoreSpec
from studyctl.definition.places import Place
from studyctl.definition.points import CheckpointOptions
from studyctl.objstore.target import S3Target
from studyctl.units import MIB

# What `cold_read: auto` means on an object store (recorded as the result's cold_read_method): no client cache.
OBJECT_COLD_READ: Literal["no_cache"] = "no_cache"
OBJECT_IO_MODE = "buffered"


def object_point_problems(io_mode: str, opts: CheckpointOptions) -> tuple[str, ...]:
    """Why a point cannot run on an object store (one line each; empty: it can)."""
    problems = []
    if io_mode != OBJECT_IO_MODE:
        problems.append(f"io_mode {io_mode}: an object store has no O_DIRECT; s3 points run io_mode buffered")
    if opts.cold_read != "auto":
        problems.append(f"cold_read {opts.cold_read}: an object store has no page cache to bypass or evict; s3 "
                        "reads are always cold on the client (cold_read auto)")
    if opts.part_mib > opts.buffer_mib:
        problems.append(f"part_mib {opts.part_mib} exceeds buffer_mib {opts.buffer_mib}: a part is a slice of the "
                        "rank's one buffer")
    return tuple(problems)


@dataclass(frozen=True)
class ObjectRequests:
    """Requests that moving some objects takes (PUT/initiate/complete, part uploads, ranged GETs)."""

    objects: int = 0
    put: int = 0
    part: int = 0
    get: int = 0

    def __add__(self, other: ObjectRequests) -> ObjectRequests:
        return ObjectRequests(self.objects + other.objects, self.put + other.put, self.part + other.part,
                              self.get + other.get)

    def times(self, n: int) -> ObjectRequests:
        return ObjectRequests(self.objects * n, self.put * n, self.part * n, self.get * n)


def parts_of(nbytes: int, part_bytes: int) -> int:
    """Parts (or ranged GETs) of an object of `nbytes`; an empty object is read with none."""
    return -(-nbytes // part_bytes)


def write_requests(sizes: Iterable[int], part_mib: int) -> ObjectRequests:
    """Writing one object per size: one PUT at or below the part size, else 2 + its parts."""
    part_bytes = part_mib * MIB
    total = ObjectRequests()
    for n in sizes:
        multipart = n > part_bytes
        total += ObjectRequests(1, 2 if multipart else 1, parts_of(n, part_bytes) if multipart else 0, 0)
    return total


def read_requests(sizes: Iterable[int], part_mib: int) -> ObjectRequests:
    """Reading each object whole with ranged GETs of the part size."""
    part_bytes = part_mib * MIB
    total = ObjectRequests()
    for n in sizes:
        total += ObjectRequests(1, 0, 0, parts_of(n, part_bytes))
    return total


def object_target(url: str, store: ObjectStoreSpec) -> S3Target:
    """The S3 target of a filesystem of kind s3 (its `path` and how to reach it)."""
    return S3Target.from_url(url, endpoint=store.endpoint, region=store.region, addressing=store.addressing)


def sweep_targets(filesystems: Mapping[str, FilesystemSpec]) -> list[S3Target]:
    """The S3 target of every filesystem of kind s3 (`sweep.filesystems`)."""
    return [object_target(fs.path, fs.object_store) for fs in filesystems.values() if fs.object_store is not None]


def place_target(place: Place) -> S3Target:
    """The target whose prefix is the point's own (`<prefix>/<study>.<key>/<point_id>`)."""
    assert place.store is not None, "a place on an object store"
    return object_target(place.root, place.store).below(place.object_key)
