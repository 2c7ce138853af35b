"""Write and read primitives that run at the disk's speed from Python.

One page-aligned anonymous mmap per rank is the only data buffer: filled once with random bytes
(generating data inside the timed loop costs more than the disk), written with `os.pwrite` in
`block` chunks, read back with `os.preadv` into the same buffer. Before each chunk is written, 8
bytes of each of its 4 KiB pages get a serial number (one strided copy, ~0.03 ms per 16 MiB), so
no two written pages are equal: deduplicating or compressing storage sees a real checkpoint, not
the buffer repeated (fio's scramble_buffers does the same). O_DIRECT needs aligned buffer,
offsets and lengths: the tail is padded to the alignment and the file truncated to its true size.
Every call that opens a file adds its open, transfer, fsync and close time to a `Split` (the per-rank time split).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

ALIGN = 4096  # O_DIRECT alignment that satisfies 512 B and 4 KiB logical blocks


class DirectIORefused(OSError):
    """The filesystem refused O_DIRECT (EINVAL at open, e.g. tmpfs)."""


class Split:
    """Where one rank's time of one phase went, summed over its files, in ns: the calls it makes itself are
    timed with two perf_counter_ns reads each (no extra syscall); `transfer` is timed around a file's whole
    chunk loop (pwrite/preadv and the page stamping between them), by the caller via `transferred`."""

    __slots__ = ("close_ns", "fsync_ns", "open_ns", "transfer_ns")

    def __init__(self) -> None:
        self.open_ns = self.transfer_ns = self.fsync_ns = self.close_ns = 0

    def open(self, path: str, flags: int, direct: bool = False) -> int:
        """os.open (O_DIRECT when `direct`, refused as DirectIORefused), timed."""
        if direct:
            return self._timed("open_ns", _open_direct, path, flags)
        return self._timed("open_ns", os.open, path, flags, 0o644)

    def fsync(self, fd: int) -> None:
        self._timed("fsync_ns", os.fsync, fd)

    def close(self, fd: int) -> None:
        self._timed("close_ns", os.close, fd)

    def _timed(self, part: str, call: Callable[..., Any], *args: Any) -> Any:
        """`call(*args)`, its time added to `part` whether it returns or raises."""
        start = perf_counter_ns()
        try:
            return call(*args)
        finally:
            setattr(self, part, getattr(self, part) + perf_counter_ns() - start)

    def transferred(self, since_ns: int) -> None:
        """Add the time from `since_ns` (a perf_counter_ns reading) to now to the transfer part."""
        self.transfer_ns += perf_counter_ns() - since_ns

    def seconds(self) -> tuple[float, float, float, float]:
        """(open, transfer, fsync, close) in seconds: what a rank sends with its stamps."""
        return self.open_ns / 1e9, self.transfer_ns / 1e9, self.fsync_ns / 1e9, self.close_ns / 1e9


@dataclass
class Buffer:
    """The rank's one reused buffer."""

    mem: mmap.mmap
    view: memoryview
    serial: int = 0  # the last chunk serial written into the buffer
    words: memoryview = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.words = self.view.cast("Q")

    @classmethod
    def allocate(cls, nbytes: int) -> Buffer:
        nbytes = max(ALIGN, nbytes - nbytes % ALIGN)
        mem = mmap.mmap(-1, nbytes)  # anonymous: page-aligned
        chunk = 1 << 20
        for off in range(0, nbytes, chunk):
            mem[off:off + chunk] = os.urandom(min(chunk, nbytes - off))
        return cls(mem, memoryview(mem))

    @property
    def size(self) -> int:
        return len(self.mem)

    def stamp(self, tag: int) -> None:
        """Change 8 bytes in every 4 KiB page: each checkpoint's data differs (no dedup) and every
        page is touched before the clock starts (idle VM memory is slow to touch again). Chunk
        serials continue from `tag`, so ranks and checkpoints never repeat one another's."""
        heads = self.words[::ALIGN // 8]
        heads[:] = array("Q", [tag & 0xFFFFFFFFFFFFFFFF]) * len(heads)
        self.serial = (tag << 24) & 0xFFFFFFFFFFFFFFFF

    def mark(self, boff: int, length: int) -> None:
        """A new serial in the first 8 bytes of every page of buffer[boff:boff+length] (page-aligned boff)."""
        self.serial = (self.serial + 1) & 0xFFFFFFFFFFFFFFFF
        heads = self.words[boff // 8:(boff + length) // 8:ALIGN // 8]
        heads[:] = array("Q", [self.serial]) * len(heads)

    def close(self) -> None:
        self.words.release()
        self.view.release()
        self.mem.close()


def _chunks(nbytes: int, block: int, buffer_size: int):
    """(file offset, buffer offset, length) covering `nbytes`, cycling through the buffer."""
    off = 0
    while off < nbytes:
        boff = off % buffer_size
        length = min(block, nbytes - off, buffer_size - boff)
        yield off, boff, length
        off += length


def _open_direct(path: str, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_DIRECT, 0o644)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise DirectIORefused(errno.EINVAL, f"O_DIRECT refused by the filesystem at {path}") from None
        raise


def write_buffered(path: str, nbytes: int, buf: Buffer, block: int, fsync: bool = True,
                   split: Split | None = None, stop_ns: int = 0) -> int:
    """write + fsync (`fsync` false only mirrors DLIO); bytes written. No page eviction here: pages freed long
    before the restore sit idle, and this VM hands idle memory back to the host, which made cold reads 20% slower
    (benchmarks/RESULTS.md); the restore evicts its files just before the clock starts instead. `stop_ns`: a
    perf_counter_ns time after which no block is started (a time-bounded probe; 0: none)."""
    split = split if split is not None else Split()
    fd = split.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        start = perf_counter_ns()
        view = buf.view
        done = 0
        for off, boff, length in _chunks(nbytes, block, buf.size):
            if stop_ns and perf_counter_ns() >= stop_ns:
                break
            buf.mark(boff, length)
            _pwrite_all(fd, view[boff:boff + length], off)
            done = off + length
        split.transferred(start)
        if fsync:
            split.fsync(fd)
        return done
    finally:
        split.close(fd)


def write_direct(path: str, nbytes: int, buf: Buffer, block: int, hybrid: bool, fsync: bool = True,
                 split: Split | None = None, stop_ns: int = 0) -> int:
    """O_DIRECT for the aligned bulk; the tail padded and truncated (direct) or written through the
    page cache on a second descriptor (hybrid). One fsync flushes both descriptors' data. Bytes written;
    `stop_ns` as in write_buffered (a stream stopped early ends on an aligned block: no tail)."""
    split = split if split is not None else Split()
    bulk = nbytes - nbytes % ALIGN
    tail = nbytes - bulk
    fd = split.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, direct=True)
    try:
        start = perf_counter_ns()
        view = buf.view
        for off, boff, length in _chunks(bulk, block, buf.size):
            if stop_ns and perf_counter_ns() >= stop_ns:
                bulk, tail = off, 0
                break
            buf.mark(boff, length)
            _pwrite_all(fd, view[boff:boff + length], off)
        if tail and hybrid:
            split.transferred(start)
            tail_fd = split.open(path, os.O_WRONLY)
            try:
                start = perf_counter_ns()
                _pwrite_all(tail_fd, view[:tail], bulk)
                split.transferred(start)
                if fsync:
                    split.fsync(tail_fd)
            finally:
                split.close(tail_fd)
            return nbytes
        if tail:
            _pwrite_all(fd, view[:ALIGN], bulk)  # padded to the alignment, truncated below
            os.ftruncate(fd, nbytes)
        split.transferred(start)
        if fsync:
            split.fsync(fd)
        return bulk + tail
    finally:
        split.close(fd)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    done = os.pwrite(fd, data, offset)
    while done < len(data):  # short writes are rare but legal
        done += os.pwrite(fd, data[done:], offset + done)


def evict(path: str, flush: bool = False) -> None:
    """Drop a file's cached pages. After fsync they are clean, so this empties the cache; a file written
    without fsync (DLIO's way) is flushed first (`flush`), since dirty pages cannot be dropped."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if flush:
            os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_file(path: str, buf: Buffer, block: int, direct: bool, split: Split | None = None, stop_ns: int = 0) -> int:
    """Read the whole file into the reused buffer; returns bytes read. Its open time holds the fadvise and fstat.
    `stop_ns` as in write_buffered."""
    split = split if split is not None else Split()
    start = perf_counter_ns()
    fd = _open_direct(path, os.O_RDONLY) if direct else os.open(path, os.O_RDONLY)
    try:
        if not direct:  # a whole-file sequential read: let the kernel read ahead further
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        size = os.fstat(fd).st_size
        split.open_ns += perf_counter_ns() - start
        start = perf_counter_ns()
        span = size + (-size % ALIGN) if direct else size
        view = buf.view
        total = 0
        for off, boff, length in _chunks(span, block, buf.size):
            if stop_ns and perf_counter_ns() >= stop_ns:
                break
            got = os.preadv(fd, [view[boff:boff + length]], off)
            total += got
            if got < length:
                break
        split.transferred(start)
        return min(total, size)
    finally:
        split.close(fd)


def direct_supported(directory: str) -> bool:
    """Probe O_DIRECT on `directory` with a one-block file."""
    probe = os.path.join(directory, f".odirect-probe-{os.getpid()}")
    try:
        os.close(_open_direct(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        return True
    except DirectIORefused:
        return False
    finally:  # some filesystems create the file before refusing the flag
        with contextlib.suppress(FileNotFoundError):
            os.unlink(probe)
