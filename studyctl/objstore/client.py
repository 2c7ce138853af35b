"""ObjectClient: one per rank; whole objects in (multipart above the part size) and out (ranged GETs), each
part request on a thread of the rank's own pool, with `concurrency` requests in flight.

A multipart upload that fails in any way (an error, Ctrl-C, a SIGTERM handler raising) is aborted before the
exception goes on; uploads still open when a handler runs can be aborted with `abort_in_flight()`.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from studyctl.objstore import cleanup
from studyctl.objstore.calls import MAX_ATTEMPTS, TIMEOUT_S, CountedCalls, RetryPolicy, worker_policy
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import ObjectStoreError, failure
from studyctl.objstore.target import MIN_PART_BYTES, S3Target

FIRST_READ = 64 * 1024  # the first read of a GET: small, so its return times the first byte, not the range


def spans(size: int, part_bytes: int) -> Iterator[tuple[int, int, int]]:
    """(part number from 1, offset, length) of each part of `size` bytes."""
    for number, offset in enumerate(range(0, size, part_bytes), start=1):
        yield number, offset, min(part_bytes, size - offset)


class ObjectClient:
    """Puts and gets whole objects of one target (keys are full keys: use `target.key(relative)`)."""

    def __init__(self, target: S3Target, concurrency: int, part_bytes: int, attempts: int = MAX_ATTEMPTS,
                 timeout_s: float = TIMEOUT_S, policy: RetryPolicy | None = None) -> None:
        """`attempts` per request (botocore's standard retry mode); `timeout_s` to connect (at most 10 s) and
        between bytes of an answer; or a whole `policy` (clean-up's short one)."""
        if concurrency < 1 or part_bytes < MIN_PART_BYTES:
            raise ValueError(f"concurrency ≥ 1 and part_bytes ≥ {MIN_PART_BYTES} (S3's smallest part but the last)")
        self.target = target
        self.concurrency = concurrency
        self.part_bytes = part_bytes
        self.calls = CountedCalls(target, concurrency, policy or worker_policy(attempts, timeout_s))
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="objstore")
        self._open: dict[str, str] = {}  # upload id → key, of multipart uploads not yet completed or aborted
        self._open_lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ObjectClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ write
    def put(self, key: str, data: memoryview, counts: RequestCounts) -> None:
        """One PutObject at or below the part size, else a multipart upload with `concurrency` parts in flight."""
        self.put_from(key, len(data), lambda offset, length: data[offset:offset + length], counts)

    def put_from(self, key: str, nbytes: int, chunk: Callable[[int, int], memoryview],
                 counts: RequestCounts) -> None:
        """`put` of an object no buffer holds whole: its bytes [offset, offset+length) are `chunk(offset,
        length)`, asked for each part (from any pool thread) and kept unchanged until that part is sent."""
        if nbytes <= self.part_bytes:
            self.calls.call(counts, "put", "put_object", f"PUT {key}", Bucket=self.target.bucket, Key=key,
                            Body=_View(chunk(0, nbytes)))
            return
        upload_id = self.initiate(key, counts)
        try:
            etags = self._run_parts(nbytes, lambda n, o, ln: self.part(key, upload_id, n, chunk(o, ln), counts))
            self.complete(key, upload_id, etags, counts)
        except BaseException:
            self.abort(key, upload_id, counts)
            raise

    def initiate(self, key: str, counts: RequestCounts) -> str:
        """A multipart upload begun (and registered for `abort_in_flight`); returns its upload id."""
        started = self.calls.call(counts, "put", "create_multipart_upload", f"initiate {key}",
                                  Bucket=self.target.bucket, Key=key)
        upload_id: str = started["UploadId"]
        with self._open_lock:
            self._open[upload_id] = key
        return upload_id

    def complete(self, key: str, upload_id: str, etags: list[tuple[int, str]], counts: RequestCounts) -> None:
        """The upload's parts, (number, ETag) in part order, made one object."""
        self.calls.call(counts, "put", "complete_multipart_upload", f"complete {key}",
                        Bucket=self.target.bucket, Key=key, UploadId=upload_id,
                        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in etags]})
        with self._open_lock:
            self._open.pop(upload_id, None)

    def part(self, key: str, upload_id: str, number: int, chunk: memoryview, counts: RequestCounts) -> tuple[int, str]:
        """One UploadPart; returns (number, ETag) for `complete`."""
        answer = self.calls.call(counts, "part", "upload_part", f"part {number} of {key}",
                                 Bucket=self.target.bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                 Body=_View(chunk))
        return number, answer["ETag"]

    def abort(self, key: str, upload_id: str, counts: RequestCounts | None) -> None:
        """Aborts the upload; a failure to abort is left for `abort_uploads` (the next command's cleanup)."""
        with self._open_lock:
            self._open.pop(upload_id, None)
        with contextlib.suppress(ObjectStoreError):
            self.calls.call(counts or RequestCounts(), "delete", "abort_multipart_upload", f"abort {key}",
                            Bucket=self.target.bucket, Key=key, UploadId=upload_id)

    def abort_in_flight(self) -> int:
        """Aborts every multipart upload this client has open (for a signal handler); returns how many."""
        with self._open_lock:
            uploads = list(self._open.items())
        for upload_id, key in uploads:
            self.abort(key, upload_id, None)
        return len(uploads)

    # ------------------------------------------------------------------------------------------------- read
    def get(self, key: str, into: memoryview, offset: int, counts: RequestCounts) -> int:
        """Reads len(into) bytes of `key` from `offset` with ranged GETs of the part size; returns bytes read."""
        return self.get_into(key, len(into), lambda start, length: into[start:start + length], offset, counts)

    def get_into(self, key: str, nbytes: int, into: Callable[[int, int], memoryview], offset: int,
                 counts: RequestCounts) -> int:
        """`get` of `nbytes` into places no one buffer holds: the bytes [offset+start, offset+start+length) go
        into `into(start, length)`, asked for each part (from any pool thread); returns bytes read."""
        first = counts.first_byte_s is None
        results = self._run_parts(
            nbytes, lambda n, o, ln: self._range(key, into(o, ln), offset + o, counts, first and n == 1))
        return sum(results)

    def _range(self, key: str, into: memoryview, offset: int, counts: RequestCounts,
               timed: bool) -> int:
        t0 = time.perf_counter()
        what = f"GET {key} bytes {offset}-{offset + len(into) - 1}"
        answer = self.calls.call(counts, "get", "get_object", what, Bucket=self.target.bucket, Key=key,
                                 Range=f"bytes={offset}-{offset + len(into) - 1}")
        try:
            got = _read_into(answer["Body"], into, lambda: _first_byte(counts, t0) if timed else None)
        except Exception as error:
            raise failure(self.target, error, what) from error
        if got != len(into):
            raise ObjectStoreError(f"{self.target.describe()}: {what}: {got} bytes came back")
        return got

    def size(self, key: str, counts: RequestCounts) -> int:
        """The object's size in bytes (one HeadObject)."""
        answer = self.calls.call(counts, "head", "head_object", f"HEAD {key}", Bucket=self.target.bucket, Key=key)
        return int(answer["ContentLength"])

    def listing(self, prefix: str, counts: RequestCounts) -> list[tuple[str, int]]:
        """(key, size) of every object under `prefix` (a full key prefix, taken as a folder), in key order."""
        return cleanup.listing(self.calls, prefix, counts)

    # --------------------------------------------------------------------------------------------- cleanup
    def delete_prefix(self, prefix: str, counts: RequestCounts | None = None) -> int:
        """Deletes every object under `prefix` (a full key prefix); returns how many."""
        return cleanup.delete_prefix(self.calls, prefix, counts or RequestCounts())

    def abort_uploads(self, prefix: str) -> int:
        """Aborts every incomplete multipart upload under `prefix`; returns how many."""
        return cleanup.abort_uploads(self.calls, prefix, RequestCounts())

    # ------------------------------------------------------------------------------------------------ pool
    def _run_parts(self, size: int, work: Callable[[int, int, int], Any]) -> list[Any]:
        """`work(number, offset, length)` for each part of `size` bytes on the pool, in part order; the first
        failure cancels the parts not yet started, waits for those running, and is raised."""
        parts = list(spans(size, self.part_bytes))
        if len(parts) <= 1:
            return [work(*p) for p in parts]
        futures: list[Future[Any]] = [self._pool.submit(work, *p) for p in parts]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    raise future.exception()  # type: ignore[misc]
            return [f.result() for f in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            wait(futures)
            raise


class _View(io.RawIOBase):
    """A memoryview as a seekable file whose reads are slices of it: a request body sent without a copy
    (botocore takes bytes, bytearray or a file; a retry seeks back to the start)."""

    def __init__(self, data: memoryview) -> None:
        self._data = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._data)}[whence]
        self._pos = max(0, min(len(self._data), base + offset))
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else min(len(self._data), self._pos + size)
        chunk = self._data[self._pos:end]
        self._pos = end
        return chunk  # type: ignore[return-value]  # bytes-like: sockets send it as is

    def __len__(self) -> int:
        return len(self._data)


def _first_byte(counts: RequestCounts, t0: float) -> None:
    if counts.first_byte_s is None:
        counts.first_byte_s = time.perf_counter() - t0


def _read_into(body: Any, into: memoryview, on_first: Callable[[], None]) -> int:
    """Streams the response body into `into` (urllib3's readinto when botocore exposes it: no copy)."""
    raw = getattr(body, "_raw_stream", None)
    readinto = getattr(raw, "readinto", None)
    got = 0
    while got < len(into):
        # the first read is small so that its return marks the first byte, not the whole range
        want = into[got:got + FIRST_READ] if got == 0 else into[got:]
        if readinto is not None:
            n = readinto(want)
        else:
            chunk = body.read(len(want))
            n = len(chunk)
            into[got:got + n] = chunk
        if not n:
            break
        if got == 0:
            on_first()
        got += n
    return got
