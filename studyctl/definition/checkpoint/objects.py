"""What a point on an object store (a filesystem of kind s3) asks of it, and what it cannot do there (pure). A point
writes one object per DLIO file: at or below `part_mib` one PUT, above it a multipart upload (CreateMultipartUpload,
one UploadPart per part, CompleteMultipartUpload: counted put 2 + parts, as `studyctl.objstore.counts.RequestCounts`
counts them). A restore reads every object with ranged GETs of `part_mib` each (restore broadcast: a group's root
reads the replicated objects a block_mib chunk at a time, each chunk broadcast as it lands, so below part_mib its
GETs are one per block). O_DIRECT and page-cache eviction have no meaning for an object store: its reads are cold on
the client (no client cache: every byte crosses the network from the server); the server's own cache is the
server's. So an object point runs io_mode buffered and cold_read auto, and anything else is refused at plan time,
as is a point whose largest object or longest key S3 would refuse (`studyctl.objstore.limits`): found at its first
PUT, or after 48.8 GiB of a 130 GiB object at 5 MiB parts, otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from studyctl.definition.checkpoint.layout import (
    DEFAULT_CONVENTION,
    Convention,
    Naming,
    Parallelism,
    rank_files,
    step_dir_name,
    write_classes,
)
from studyctl.definition.checkpoint.places import Place, study_dir_name
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, data_key
from studyctl.definition.inputs.catalog import ModelSpec
from studyctl.definition.inputs.filesystems import FilesystemSpec, ObjectStoreSpec
from studyctl.objstore.limits import MAX_KEY_BYTES, MAX_OBJECT_BYTES, MAX_PARTS, MIN_PART_BYTES
from studyctl.objstore.target import S3Target
from studyctl.units import MIB, format_bytes

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
    if opts.engine == "dcp":
        problems.append("checkpoint.engine dcp on filesystem kind s3: DCP's FileSystemWriter writes a directory, "
                        "which an object store has not; use engine torch_save or stream there")
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


def smallest_part_mib(nbytes: int) -> int:
    """The least part_mib whose multipart upload of `nbytes` takes at most S3's MAX_PARTS parts."""
    return max(MIN_PART_BYTES // MIB, -(-nbytes // (MAX_PARTS * MIB)))


def object_size_problem(name: str, nbytes: int, part_mib: int) -> str | None:
    """Why S3 cannot take one object of `nbytes` uploaded in parts of `part_mib` (one line), or None."""
    if nbytes > MAX_OBJECT_BYTES:
        return (f"object {name} of {format_bytes(nbytes)} is over S3's largest object, "
                f"{format_bytes(MAX_OBJECT_BYTES)}: more ranks or a smaller checkpoint.scale")
    parts = parts_of(nbytes, part_mib * MIB)
    if nbytes <= part_mib * MIB or parts <= MAX_PARTS:
        return None
    return (f"object {name} of {format_bytes(nbytes)} at part_mib {part_mib} takes {parts:,} parts, over S3's "
            f"{MAX_PARTS:,} per object; the smallest part_mib that fits is {smallest_part_mib(nbytes)}")


def key_problem(key: str, parts: Sequence[tuple[str, str]] = ()) -> str | None:
    """Why S3 refuses an object key (over MAX_KEY_BYTES in UTF-8), naming the longest of its `parts`
    (what each is, its text), or None."""
    size = len(key.encode())
    if size <= MAX_KEY_BYTES:
        return None
    longest = ""
    if parts:
        what, text = max(parts, key=lambda p: len(p[1].encode()))
        longest = f"; its longest part is {what} ({len(text.encode()):,} bytes)"
    return f"object keys of {size:,} bytes, over S3's {MAX_KEY_BYTES:,}{longest}"


@lru_cache(maxsize=4096)
def _extremes(m: ModelSpec, par: Parallelism, scale: float, naming: Naming, conv: Convention = DEFAULT_CONVENTION
              ) -> tuple[str, int, str]:
    """(the largest object's name, its bytes, the longest file name) of a checkpoint: sizes per class of ranks;
    names are longest on the last rank (the largest DP and MP numbers) and the last model-parallel rank of DP
    replica 0 (the last stage's layer files)."""
    ranks = {rank for rank, _ in write_classes(m, par, scale, conv)} | {par.ranks - 1,
                                                                      min(par.model_parallel, par.ranks) - 1}
    files = [f for rank in sorted(ranks) for f in rank_files(m, par, rank, scale, naming, conv)]
    largest = max(files, key=lambda f: f.nbytes)
    return largest.name, largest.nbytes, max((f.name for f in files), key=lambda n: len(n.encode()))


def store_limit_problems(point: Point, url: str, store: ObjectStoreSpec, study: str) -> tuple[str, ...]:
    """What S3 would refuse of this point's checkpoints on the store at `url`: its largest object at its part
    size, its longest key (built as the worker builds it, with a results key of the usual length)."""
    opts = point.checkpoint
    name, nbytes, longest = _extremes(point.model, point.parallelism, opts.scale, opts.naming, opts.convention)
    problems = [p for p in (object_size_problem(name, nbytes, opts.part_mib),) if p]
    if problems and smallest_part_mib(nbytes) > opts.buffer_mib:
        problems[0] += " (and buffer_mib at least as large: a part is a slice of the rank's buffer)"
    root = object_target(url, store)
    study_dir = study_dir_name(study, "k" * len(data_key(Path("/"))))
    step = step_dir_name(max(opts.writes - 1, 0), opts.naming)
    key = root.below(f"{study_dir}/{point.point_id}").key(f"{step}/{longest}")
    parts = (("the filesystem's prefix", root.prefix), ("the study name", study), ("the file name", longest))
    return (*problems, *(p for p in (key_problem(key, parts),) if p))
