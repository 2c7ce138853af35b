"""Writing checkpoint files from memory that is not the rank's cycling buffer: a host-memory snapshot
(async) or a chunk read back from the node-local tier (tiered drain). Same I/O modes as `worker.io`:
buffered write + fsync; O_DIRECT bulk with the tail padded and truncated (direct) or written through the
page cache (hybrid).
"""

from __future__ import annotations

import mmap
import os
from array import array
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter_ns

from worker import io
from worker.io import ALIGN


def aligned(n: int) -> int:
    return n + (-n % ALIGN)


STATE_NOISE_BYTES = 16 << 20


class Snapshot:
    """Host memory for one rank's state, and the state it copies from: each file in its own page-aligned region.

    The state stands in for the device memory a real snapshot copies out of (there is no device here): the
    same layout, random bytes, each page's first 8 bytes a new serial per checkpoint (stamped off the clock),
    so every page of every checkpoint differs. The blocking copy is then one memmove per file, as a device-to-
    host copy of a tensor is one transfer: glibc copies that large with non-temporal stores, about twice the
    rate of the same bytes in 16 MiB pieces here (benchmarks/RESULTS.md). State and snapshot share one layout,
    so the rank's whole state is one copy (with the few padding bytes between files)."""

    def __init__(self, sizes: list[int]) -> None:
        self.offsets = []
        total = 0
        for n in sizes:
            self.offsets.append(total)
            total += aligned(n)
        self.mem = mmap.mmap(-1, max(total, ALIGN))
        self.view = memoryview(self.mem)
        self.words = self.view.cast("Q")
        self.state = mmap.mmap(-1, len(self.mem))
        # one random block tiled over the state (os.urandom runs at a fifth of the disk's rate here): the per-page
        # serials `prepare` stamps make every page of every checkpoint differ all the same
        noise = os.urandom(STATE_NOISE_BYTES)
        for off in range(0, len(self.state), STATE_NOISE_BYTES):
            self.state[off:off + STATE_NOISE_BYTES] = noise[:len(self.state) - off]
        self.state_view = memoryview(self.state)
        self.state_words = self.state_view.cast("Q")

    @property
    def nbytes(self) -> int:
        return len(self.mem)

    def prepare(self, tag: int) -> None:
        """Off the clock: every snapshot page resident (this VM hands idle memory back to its host), and a new
        serial in every page of the state, counting on from `tag`."""
        heads = self.words[::ALIGN // 8]
        heads[:] = array("Q", [0]) * len(heads)
        serials = self.state_words[::ALIGN // 8]
        base = (tag << 24) & 0xFFFFFFFFFFFFFFFF
        serials[:] = array("Q", range(base, base + len(serials)))

    def fill(self) -> None:
        """Copy the rank's state into the snapshot: one copy."""
        self.view[:] = self.state_view

    def region(self, index: int, nbytes: int) -> memoryview:
        start = self.offsets[index]
        return self.view[start:start + aligned(nbytes)]

    def close(self) -> None:
        for view in (self.words, self.view, self.state_words, self.state_view):
            view.release()
        self.mem.close()
        self.state.close()


class FileWriter:
    """One output file written chunk by chunk at increasing offsets, in an I/O mode; its calls are timed into
    `split` (transfer: the pwrite calls themselves; a hybrid tail's open, fsync and close as such)."""

    def __init__(self, path: str, nbytes: int, mode: str, split: io.Split) -> None:
        self.path, self.nbytes, self.mode, self.split = path, nbytes, mode, split
        self.fd = split.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, direct=mode != "buffered")
        self.bulk = nbytes - nbytes % ALIGN

    def write(self, data: memoryview, offset: int) -> None:
        """`data` at `offset`; with O_DIRECT, `data` is page-aligned and may run past the file's end."""
        start = perf_counter_ns()
        if self.mode == "buffered":
            io._pwrite_all(self.fd, data[:max(0, self.nbytes - offset)], offset)
            self.split.transferred(start)
            return
        bulk_len = max(0, min(len(data), self.bulk - offset))
        if bulk_len:
            io._pwrite_all(self.fd, data[:bulk_len], offset)
        tail = min(len(data), self.nbytes - offset) - bulk_len
        if tail > 0 and self.mode != "hybrid":
            io._pwrite_all(self.fd, data[bulk_len:bulk_len + ALIGN], self.bulk)
            os.ftruncate(self.fd, self.nbytes)
        self.split.transferred(start)
        if tail > 0 and self.mode == "hybrid":
            tail_fd = self.split.open(self.path, os.O_WRONLY)
            try:
                start = perf_counter_ns()
                io._pwrite_all(tail_fd, data[bulk_len:bulk_len + tail], self.bulk)
                self.split.transferred(start)
                self.split.fsync(tail_fd)
            finally:
                self.split.close(tail_fd)

    def close(self) -> None:
        try:
            self.split.fsync(self.fd)
        finally:
            self.split.close(self.fd)


def write_region(path: str, region: memoryview, nbytes: int, block: int, mode: str, split: io.Split) -> None:
    """A snapshot region to a file, `block` bytes per call, fsync at the end."""
    out = FileWriter(path, nbytes, mode, split)
    try:
        for off in range(0, nbytes, block):
            out.write(region[off:off + block], off)
    finally:
        out.close()


def copy_file(src: str, dst: str, nbytes: int, buf: io.Buffer, block: int, mode: str, split: io.Split) -> None:
    """Drain: copy `src` (the node-local tier) to `dst` (shared storage), double-buffered: a helper thread reads
    the next chunk into one half of `buf` while this one writes the other half (read-then-write in turn ran
    at ~0.75x of a write alone here: benchmarks/RESULTS.md). Split: both files' opens and closes; transfer is
    the writes and this thread's waits for a chunk read."""
    step = min(block, buf.size // 2)
    step -= step % ALIGN
    halves = (buf.view[:step], buf.view[step:2 * step])
    fd = split.open(src, os.O_RDONLY)
    out = FileWriter(dst, nbytes, mode, split)

    def read(off: int, into: memoryview) -> int:
        length = min(step, nbytes - off)
        got = os.preadv(fd, [into[:length]], off)
        if got < length:
            raise OSError(5, f"short read of {src}: {off + got} of {nbytes} bytes", src)
        return length

    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        with ThreadPoolExecutor(1, thread_name_prefix="drain-read") as reader:
            pending = reader.submit(read, 0, halves[0]) if nbytes else None
            off, i = 0, 0
            while pending is not None:
                start = perf_counter_ns()
                length = pending.result()
                split.transferred(start)
                nxt = off + length
                pending = reader.submit(read, nxt, halves[(i + 1) % 2]) if nxt < nbytes else None
                out.write(halves[i % 2][:aligned(length)], off)
                off, i = nxt, i + 1
    finally:
        split.close(fd)
        out.close()
