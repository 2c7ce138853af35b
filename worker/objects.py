"""A point's checkpoints on an object store (a filesystem of kind s3): one object per DLIO file.

Keys are `<prefix>/<study>.<key>/<point_id>/<step dir>/<DLIO file name>`: the relative path a POSIX point
writes below its filesystem path. An object at or below `part_mib` is one PUT, a larger one a multipart upload
with `s3_concurrency` parts in flight (aborted on any error); a restore reads each object with ranged GETs of
`part_mib`, `s3_concurrency` in flight, in one pipeline per object. Memory stays one buffer per rank: an object
larger than the buffer is sent from it, and read into it, part by part (parts cycle through the buffer's
part-sized slots, so a written object's bytes repeat every buffer size; each checkpoint's buffer is stamped anew,
off the clock; restored bytes are discarded, as the POSIX reader discards them).

Phase split for objects: `transfer_s` is the time of every request of the rank's objects (initiate, parts and
complete, or PUT; the GETs); open, fsync and close are 0 (an object has none); requests by kind, retries,
throttled answers and the time to first byte are in the rank's `requests`. Reads are cold on the client by
construction (no client cache exists: every byte is a GET); the server's cache is the server's.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
from collections.abc import Callable
from functools import partial
from time import perf_counter_ns
from typing import Any, TypeVar

from studyctl.definition.checkpoint.objects import key_problem, object_size_problem, object_target, place_target
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.objstore.cache import drop_server_cache
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import ObjectStoreError
from studyctl.objstore.preflight import target_problem
from studyctl.states import FailureClass
from studyctl.units import MIB
from worker import io

Problem = tuple[str, str]


T = TypeVar("T")


def _request(call: Callable[[], T]) -> T:
    """`call()`; its ObjectStoreError comes out as a fresh one (the reason alone) once the failed requests' frames
    are collected: they hold slices of the rank's buffer (or of a mapped tier file), which cannot be closed while
    a slice is alive, and a failure's traceback keeps them in reference cycles."""
    try:
        return call()
    except ObjectStoreError as exc:
        reason = exc.reason
    gc.collect()
    raise ObjectStoreError(reason)


def cycling(view: memoryview, part: int) -> Callable[[int, int], memoryview]:
    """An object's bytes [offset, offset + length) as slices of `view` (the rank's buffer), for
    `ObjectClient.put_from`: part k is the buffer's part-sized slot k mod (buffer // part), never changed while
    the checkpoint is written (the buffer is stamped before the clock)."""
    slots = max(1, len(view) // part)

    def chunk(offset: int, length: int) -> memoryview:
        start = (offset // part % slots) * part
        return view[start:start + length]
    return chunk


class ObjectStore:
    """One rank's client of the point's objects; `counts` are the current phase's requests."""

    def __init__(self, task: WorkerTask) -> None:
        opts = task.point.checkpoint
        self.place = task.places[0]
        self.target = place_target(self.place)
        self.part = opts.part_mib * MIB
        self.client = ObjectClient(self.target, opts.s3_concurrency, self.part)
        self.counts = RequestCounts()
        self.server_cache: str | None = None  # what the last drop_server_cache did (rank 0 only)

    def drop_server_cache(self) -> None:
        """Off the clock before a cold restore, on one rank: the server's cache emptied where it can be (the
        project's local server), said either way for the result."""
        self.server_cache = drop_server_cache(self.target)

    def key(self, step: str, name: str) -> str:
        return self.target.key(f"{step}/{name}")

    def describe(self, step: str, name: str) -> str:
        return f"s3://{self.target.bucket}/{self.key(step, name)}"

    def begin(self, ph: Any) -> io.Split:
        """A phase's split and request counts, attached to it (gathered with the rank's stamps)."""
        ph.split = io.Split()
        ph.requests = self.counts = RequestCounts()
        return ph.split

    def put(self, key: str, data: memoryview, nbytes: int, split: io.Split) -> None:
        """One object from `data` (its first `nbytes`, or cycling through it), timed as transfer; one S3 would
        refuse (plan refuses its point first) fails before any request, with the limit as its reason."""
        problem = object_size_problem(key, nbytes, self.part // MIB) or key_problem(key)
        if problem:
            raise ObjectStoreError(f"{self.target.describe()}: {problem}")
        began = perf_counter_ns()
        try:
            if nbytes <= len(data):
                _request(lambda: self.client.put(key, data[:nbytes], self.counts))
            else:
                _request(lambda: self.client.put_from(key, nbytes, cycling(data, self.part), self.counts))
        finally:
            split.transferred(began)

    def get(self, key: str, nbytes: int, into: memoryview, split: io.Split, offset: int = 0) -> int:
        """`nbytes` of an object from `offset`, all its ranged GETs in one pipeline (`s3_concurrency` in flight):
        each part lands in a part-sized slot of `into`, cycling (restored bytes are discarded, as the POSIX reader
        discards them; a buffer-full at a time would drain the pipeline at every buffer's end)."""
        began = perf_counter_ns()
        try:
            if nbytes <= len(into):
                return _request(partial(self.client.get, key, into[:nbytes], offset, self.counts))
            return _request(partial(self.client.get_into, key, nbytes, cycling(into, self.part), offset, self.counts))
        finally:
            split.transferred(began)

    def put_file(self, path: str, key: str, nbytes: int, split: io.Split) -> None:
        """A node-local tier file to its object (tiered drain): the page cache's copy, mapped, no buffer."""
        began = perf_counter_ns()
        fd = split.open(path, os.O_RDONLY)
        try:
            if nbytes == 0:
                self.client.put(key, memoryview(b""), self.counts)
                return
            with mmap.mmap(fd, nbytes, prot=mmap.PROT_READ) as mapped:
                view = memoryview(mapped)
                try:
                    _request(lambda: self.client.put(key, view, self.counts))
                finally:
                    view.release()
        finally:
            split.close(fd)
            split.transferred(began)

    def remove_step(self, step: str) -> None:
        """Off the clock: a checkpoint no restore reads (its objects), not counted in any phase."""
        self.client.delete_prefix(self.target.key(step))

    def remove_point(self) -> None:
        """Every incomplete upload and object of the point (studyctl.attempt.objects does the same after a kill)."""
        self.client.abort_uploads(self.target.prefix)
        self.client.delete_prefix(self.target.prefix)

    def remove_point_quietly(self) -> None:
        """`remove_point`; a store that cannot be asked now leaves it to the next command (its cleanup marker)."""
        with contextlib.suppress(ObjectStoreError):
            self.remove_point()

    def close(self) -> None:
        self.client.close()


def setup_problem(task: WorkerTask) -> Problem | None:
    """Rank 0, before any data moves: the store takes a small object under the filesystem's prefix (the
    submit-time check, again where the ranks run)."""
    assert task.object_store is not None
    problem = target_problem(object_target(task.filesystem_path, task.object_store))
    return (FailureClass.IO_ERROR.value, f"filesystem {task.point.filesystem}: {problem}") if problem else None


def filesystem_info(task: WorkerTask) -> dict[str, str]:
    """What the result records as the filesystem's mount: the store, never its credentials."""
    assert task.object_store is not None
    return {"mount_point": task.filesystem_path, "fstype": "s3",
            "source": object_target(task.filesystem_path, task.object_store).describe(), "mount_options": ""}
