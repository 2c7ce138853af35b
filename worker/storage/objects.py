"""A point's checkpoints as objects of an S3 store (`worker.objects`: one object per file, its key the path a
POSIX point would write below the filesystem path). No directories, no page cache on the client: a step needs no
preparing, a read is cold by construction and only the server's cache is dropped (by rank 0, where it can be).
Engines stream objects: writes as multipart uploads of `part_mib` parts (`s3_concurrency` in flight, completed on
close, aborted on any error), reads as ranged GETs (a read larger than a part: its parts in one pipeline)."""

from __future__ import annotations

import io as pyio
import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from time import perf_counter_ns
from typing import Any, BinaryIO

from studyctl.definition.checkpoint.layout import CheckpointFile
from studyctl.definition.checkpoint.objects import OBJECT_COLD_READ, OBJECT_IO_MODE
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from worker import io
from worker.objects import ObjectStore, filesystem_info, setup_problem
from worker.storage.base import Mount, Setup, WriteStream


class ObjectChunks:
    """One object read piece by piece with ranged GETs (nothing to open)."""

    def __init__(self, store: ObjectStore, key: str, nbytes: int, split: io.Split) -> None:
        self.store, self.key, self.nbytes, self.split = store, key, nbytes, split

    def read(self, offset: int, into: memoryview) -> None:
        if offset < self.nbytes:  # a padded piece past the end asks for nothing
            self.store.get(self.key, min(len(into), self.nbytes - offset), into, self.split, offset)

    def close(self) -> None:
        pass


class ObjectStorage:
    """`worker.storage.base.Storage` on the point's objects (rank's client: `worker.objects.ObjectStore`)."""

    def __init__(self, task: WorkerTask, rank: int) -> None:
        self.task, self.rank = task, rank
        self.store = ObjectStore(task)
        self.concurrency = task.point.checkpoint.s3_concurrency

    # -- set-up
    def decide(self, checkpoint_bytes: int) -> Setup:
        """The store takes a small object (no directory, free space or O_DIRECT to decide)."""
        return Setup(setup_problem(self.task), OBJECT_IO_MODE, None, OBJECT_COLD_READ, 0, 0)

    def use(self, setup: Setup) -> None:
        pass

    def mount(self) -> Mount:
        """An object store reports no free space; its "mount" is the store."""
        return Mount(0, 0, filesystem_info(self.task), self.store.server_cache)

    @staticmethod
    def remove_after_crash(task: WorkerTask) -> None:
        """Nothing: no client is trusted after a crash; the next command's clean-up removes the objects."""

    # -- the timed phases
    def begin(self, ph: Any) -> io.Split:
        return self.store.begin(ph)

    def key(self, step: str, name: str) -> str:
        return self.store.key(step, name)

    def where(self, step: str, name: str) -> str:
        return self.store.describe(step, name)

    def prepare_step(self, step: str) -> None:
        pass

    def write_file(self, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> None:
        self.store.put(self.key(step, f.name), buf.view, f.nbytes, split)

    def write_region(self, step: str, name: str, region: memoryview, nbytes: int, split: io.Split) -> None:
        self.store.put(self.key(step, name), region, nbytes, split)

    def drain_file(self, source: str, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> None:
        self.store.put_file(source, self.key(step, f.name), f.nbytes, split)

    def read_file(self, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> int:
        return self.store.get(self.key(step, f.name), f.nbytes, buf.view, split)

    def open_chunks(self, step: str, f: CheckpointFile, split: io.Split) -> ObjectChunks:
        return ObjectChunks(self.store, self.key(step, f.name), f.nbytes, split)

    def make_cold(self, step: str, names: Sequence[str]) -> None:
        if self.rank == 0:
            self.store.drop_server_cache()

    def resident(self, step: str, names: Sequence[str]) -> tuple[int, int] | None:
        return None  # a server's cache is not this host's to ask

    def remove_step(self, step: str, names: Sequence[str]) -> None:
        self.store.remove_step(step)

    def remove_point(self) -> None:
        self.store.remove_point_quietly()

    def close(self) -> None:
        self.store.close()

    # -- for the checkpoint engines
    def step_path(self, step: str) -> Path | None:
        return None

    def list_step(self, step: str) -> list[tuple[str, int]]:
        prefix = self.store.target.key(step) + "/"
        return [(key[len(prefix):], size) for key, size in self.store.client.listing(prefix, self.store.counts)]

    def open_write(self, step: str, name: str, split: io.Split | None = None) -> BinaryIO:
        upload = Upload(self.store.client, self.key(step, name), self.concurrency, self.store.counts,
                        split if split is not None else io.Split())
        return WriteStream(upload, buffer_size=self.store.part)

    def open_read(self, step: str, name: str, split: io.Split | None = None) -> BinaryIO:
        ranged = Ranged(self.store.client, self.key(step, name), self.store.counts,
                        split if split is not None else io.Split())
        return pyio.BufferedReader(ranged, buffer_size=self.store.part)


class Upload(pyio.RawIOBase):
    """A writable stream that becomes one object: bytes gather into parts of the client's part size; an object
    that never fills more than one part is one PUT on close, a larger one a multipart upload whose parts go out
    as they fill (`concurrency` in flight, each its own copy), completed on close. Any error aborts the upload;
    closing after an error (or `abort()`) leaves no object. Request time is the split's transfer."""

    def __init__(self, client: ObjectClient, key: str, concurrency: int, counts: RequestCounts,
                 split: io.Split) -> None:
        super().__init__()
        self.client, self.key, self.counts, self.split = client, key, counts, split
        self.part = client.part_bytes
        self.concurrency = concurrency
        self.pending = bytearray()
        self.upload_id: str | None = None
        self.sent: list[Future[tuple[int, str]]] = []
        self.pool: ThreadPoolExecutor | None = None
        self.failed = False  # aborted or discarded: later writes are dropped, closing completes nothing

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = memoryview(b).cast("B")
        if self.failed:
            return len(data)
        self.pending += data
        try:
            while len(self.pending) > self.part:  # more than a part: the object is multipart
                self._send(bytes(self.pending[:self.part]))
                del self.pending[:self.part]
        except BaseException:
            self.abort()
            raise
        return len(data)

    def _send(self, chunk: bytes) -> None:
        began = perf_counter_ns()
        try:
            if self.upload_id is None:
                self.upload_id = self.client.initiate(self.key, self.counts)
                self.pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="objstore-upload")
            assert self.pool is not None
            in_flight = [f for f in self.sent if not f.done()]
            if len(in_flight) >= self.concurrency:
                in_flight[0].result()
            for f in self.sent:
                if f.done():
                    f.result()  # a failed part fails the stream now
            self.sent.append(self.pool.submit(self.client.part, self.key, self.upload_id, len(self.sent) + 1,
                                              memoryview(chunk), self.counts))
        finally:
            self.split.transferred(began)

    def discard(self) -> None:
        self.abort()

    def abort(self) -> None:
        """Abandon the object: parts in flight are waited for, the upload aborted."""
        self.failed = True
        self.pending = bytearray()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        if self.upload_id is not None:
            self.client.abort(self.key, self.upload_id, self.counts)
            self.upload_id = None

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self.failed:
                self._finish()
        except BaseException:
            self.abort()
            raise
        finally:
            super().close()

    def _finish(self) -> None:
        began = perf_counter_ns()
        try:
            if self.upload_id is None:
                self.client.put(self.key, memoryview(bytes(self.pending)), self.counts)
                return
            self._send(bytes(self.pending))
            etags = [f.result() for f in self.sent]
            self.client.complete(self.key, self.upload_id, etags, self.counts)
            self.upload_id = None
            assert self.pool is not None
            self.pool.shutdown(wait=True)
            self.pool = None
        finally:
            self.pending = bytearray()
            self.split.transferred(began)


class Ranged(pyio.RawIOBase):
    """A seekable readable stream of one object: each read is a ranged GET of what it asks for (the buffered
    reader above asks a part at a time; a read larger than a part is its parts in one pipeline). Its size is
    one HeadObject, at open."""

    def __init__(self, client: ObjectClient, key: str, counts: RequestCounts, split: io.Split) -> None:
        super().__init__()
        self.client, self.key, self.counts, self.split = client, key, counts, split
        began = perf_counter_ns()
        try:
            self.size = client.size(key, counts)
        finally:
            self.split.transferred(began)
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self.pos = base + offset
        return self.pos

    def readinto(self, b: Any) -> int:
        want = min(len(b), self.size - self.pos)
        if want <= 0:
            return 0
        view = memoryview(b).cast("B")
        began = perf_counter_ns()
        try:
            got = self.client.get(self.key, view[:want], self.pos, self.counts)
        finally:
            self.split.transferred(began)
        self.pos += got
        return got
