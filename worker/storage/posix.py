"""A point's checkpoints as POSIX files: `<point dir>/<step>/<file>`, written and read with `worker.io` (the
point's I/O mode, O_DIRECT where it asks) and made cold with fadvise; set up by claiming and creating the point
directory, checking free space and O_DIRECT."""

from __future__ import annotations

import io as pyio
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter_ns
from typing import Any, BinaryIO

from studyctl import host
from studyctl.definition.checkpoint.layout import CheckpointFile, disk_steps_needed
from studyctl.definition.checkpoint.points import ColdReadMethod, WorkerTask, cold_read_method
from studyctl.states import FailureClass
from studyctl.units import MIB, format_bytes
from worker import io, persist, residency
from worker.claim import claim, placement_problem
from worker.storage.base import Mount, Setup, WriteStream

# the decision's errors after which rank 0 removes the point directory it made (not another run's, not one it
# could not make)
_OWN_DIR_ERRORS = (FailureClass.IO_ERROR.value, FailureClass.BUSY.value)


class FileChunks:
    """A file read piece by piece through one descriptor (O_DIRECT when `direct`: pieces are aligned)."""

    def __init__(self, path: str, direct: bool, split: io.Split) -> None:
        self.split = split
        self.fd: int | None = split.open(path, os.O_RDONLY, direct=direct)

    def read(self, offset: int, into: memoryview) -> None:
        assert self.fd is not None
        began = perf_counter_ns()
        try:
            os.preadv(self.fd, [into], offset)
        finally:
            self.split.transferred(began)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            self.split.close(fd)


class _Raw(pyio.RawIOBase):
    """One descriptor as a raw stream, its calls timed into a split; closing a writer fsyncs it when asked."""

    def __init__(self, path: str, fd: int, split: io.Split, writable: bool, fsync: bool) -> None:
        super().__init__()
        self.path, self.fd, self.split, self._writable, self._fsync = path, fd, split, writable, fsync
        self.discarded = False

    def discard(self) -> None:
        self.discarded = True

    def readable(self) -> bool:
        return not self._writable

    def writable(self) -> bool:
        return self._writable

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return os.lseek(self.fd, offset, whence)

    def tell(self) -> int:
        return os.lseek(self.fd, 0, os.SEEK_CUR)

    def readinto(self, b: Any) -> int:
        began = perf_counter_ns()
        try:
            return os.readv(self.fd, [b])
        finally:
            self.split.transferred(began)

    def write(self, b: Any) -> int:
        if self.discarded:
            return len(memoryview(b).cast("B"))
        began = perf_counter_ns()
        try:
            return os.write(self.fd, b)
        finally:
            self.split.transferred(began)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._writable and self._fsync and not self.discarded:
                self.split.fsync(self.fd)
        finally:
            self.split.close(self.fd)
            super().close()
            if self.discarded:
                Path(self.path).unlink(missing_ok=True)


class PosixStorage:
    """`worker.storage.base.Storage` on files below the point's directory."""

    def __init__(self, task: WorkerTask, rank: int) -> None:
        self.task, self.rank = task, rank
        self.opts = task.point.checkpoint
        self.point_dir = task.data_dir  # the only directory the worker writes in or deletes
        self.block = self.opts.block_mib * MIB
        self.io_mode: str = task.point.io_mode
        self.cold_read: ColdReadMethod = cold_read_method(self.io_mode, self.opts.cold_read)

    # -- set-up
    def decide(self, checkpoint_bytes: int) -> Setup:
        setup = self._decide(checkpoint_bytes)
        if setup.error and setup.error[0] not in _OWN_DIR_ERRORS:
            shutil.rmtree(self.point_dir, ignore_errors=True)  # we created it; nothing else is in it yet
        return setup

    def _decide(self, checkpoint_bytes: int) -> Setup:
        """Create the point directory, check free space and O_DIRECT."""
        task, point_dir, opts = self.task, self.point_dir, self.opts
        io_mode, fallback, cold = task.point.io_mode, None, opts.cold_read
        misplaced = placement_problem(task.filesystem_path, task.filesystem_kind)
        if misplaced:
            return Setup((FailureClass.CONFIG.value, misplaced), io_mode, None, "none", 0, 0)
        try:
            busy = claim(task)
            if busy:
                return Setup((FailureClass.BUSY.value, busy), io_mode, None, "none", 0, 0)
            point_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return Setup((FailureClass.IO_ERROR.value, f"cannot create {point_dir}: {exc.strerror}"), io_mode, None,
                         "none", 0, 0)
        free, total = host.free_and_total(str(point_dir))
        steps = disk_steps_needed(opts.writes, opts.reads, opts.keep)
        required = opts.disk_bytes_required(checkpoint_bytes)
        if total and free < required:  # total 0: the filesystem reports no capacity (ramfs, some FUSE)
            reason = (f"not enough free space on {task.filesystem_path}: need {_gib(required)} ({steps} "
                      f"checkpoint(s) of {_gib(checkpoint_bytes)} on disk at once + {opts.free_space_margin:.0%} "
                      f"margin), have {_gib(free)} free")
            return Setup((FailureClass.INSUFFICIENT_SPACE.value, reason), io_mode, None, "none", free, total)
        wants_direct = cold_read_method(io_mode, cold) == "direct" or io_mode != "buffered"
        if wants_direct and not io.direct_supported(str(point_dir)):
            fstype = host.mount_of(str(point_dir))["fstype"]
            if not opts.direct_fallback:
                reason = (f"O_DIRECT refused by {task.filesystem_path} ({fstype}) for io_mode {io_mode}; "
                          "set checkpoint.direct_fallback: true to run buffered I/O instead")
                return Setup((FailureClass.DIRECT_IO_REFUSED.value, reason), io_mode, None, "none", free, total)
            fallback = f"O_DIRECT refused by {task.filesystem_path} ({fstype}): ran buffered with fadvise cold reads"
            io_mode = "buffered"
            cold = "fadvise" if cold in ("direct", "auto") else cold
        return Setup(None, io_mode, fallback, cold_read_method(io_mode, cold), free, total)

    def use(self, setup: Setup) -> None:
        self.io_mode, self.cold_read = setup.io_mode, setup.cold_read

    def mount(self) -> Mount:
        free, total = host.free_and_total(self.task.filesystem_path)
        return Mount(free, total, host.mount_of(self.task.filesystem_path), None)

    @staticmethod
    def remove_after_crash(task: WorkerTask) -> None:
        """Any rank, after an unexpected exception: the point's files and its claim file."""
        shutil.rmtree(task.data_dir, ignore_errors=True)
        task.claim_file.unlink(missing_ok=True)

    # -- the timed phases
    def begin(self, ph: object) -> io.Split:
        ph.split = split = io.Split()  # type: ignore[attr-defined]
        return split

    def path(self, step: str, name: str) -> str:
        return str(self.point_dir / step / name)

    def where(self, step: str, name: str) -> str:
        return self.path(step, name)

    def prepare_step(self, step: str) -> None:
        (self.point_dir / step).mkdir(exist_ok=True)

    def write_file(self, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> None:
        path = self.path(step, f.name)
        if self.io_mode == "buffered":
            io.write_buffered(path, f.nbytes, buf, self.block, self.opts.fsync, split)
        else:
            io.write_direct(path, f.nbytes, buf, self.block, self.io_mode == "hybrid", self.opts.fsync, split)

    def write_region(self, step: str, name: str, region: memoryview, nbytes: int, split: io.Split) -> None:
        persist.write_region(self.path(step, name), region, nbytes, self.block, self.io_mode, split)

    def drain_file(self, source: str, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> None:
        persist.copy_file(source, self.path(step, f.name), f.nbytes, buf, self.block, self.io_mode, split)

    def read_file(self, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> int:
        return io.read_file(self.path(step, f.name), buf, self.block, self.cold_read == "direct", split)

    def open_chunks(self, step: str, f: CheckpointFile, split: io.Split) -> FileChunks:
        return FileChunks(self.path(step, f.name), self.cold_read == "direct", split)

    def make_cold(self, step: str, names: Sequence[str]) -> None:
        """fadvise eviction when the point reads cold that way; files written without fsync are flushed first
        (dirty pages cannot be dropped)."""
        if self.cold_read == "fadvise":
            for name in names:
                io.evict(self.path(step, name), not self.opts.fsync)

    def resident(self, step: str, names: Sequence[str]) -> tuple[int, int] | None:
        return residency.resident(self.path(step, name) for name in names)

    def remove_step(self, step: str, names: Sequence[str]) -> None:
        for name in names:
            Path(self.path(step, name)).unlink(missing_ok=True)

    def remove_point(self) -> None:
        shutil.rmtree(self.point_dir, ignore_errors=True)

    def close(self) -> None:
        pass

    # -- for the checkpoint engines
    def step_path(self, step: str) -> Path:
        return self.point_dir / step

    def list_step(self, step: str) -> list[tuple[str, int]]:
        with os.scandir(self.point_dir / step) as entries:
            return sorted((e.name, e.stat().st_size) for e in entries if e.is_file(follow_symlinks=False))

    def open_write(self, step: str, name: str, split: io.Split | None = None) -> BinaryIO:
        """An engine's file, buffered as torch's own file writer buffers (`local_write_stream`), fsynced on close
        where the point fsyncs."""
        return local_write_stream(self.path(step, name), split if split is not None else io.Split(),
                                  self.opts.fsync)

    def open_read(self, step: str, name: str, split: io.Split | None = None) -> BinaryIO:
        return local_read_stream(self.path(step, name), split if split is not None else io.Split())


FILE_BUFFER = pyio.DEFAULT_BUFFER_SIZE
"""An engine's write buffer on a file: what `torch.save(obj, path)` writes through (its C++ writer's `std::ofstream`,
a BUFSIZ buffer: small records gathered, each tensor's bytes written straight from the tensor). A buffer of the
point's I/O block (16 MiB) copied every tensor once more and wrote 16 MiB at a time: in the CPU job's comparison
it took ~1.3-1.8x the CPU and wall of the job's own calls on the same tensors (benchmarks/RESULTS.md)."""


def local_write_stream(path: str, split: io.Split, fsync: bool) -> BinaryIO:
    """A file as an engine's write stream (`base.WriteStream`, buffered as `FILE_BUFFER` says), its calls timed
    into `split`."""
    raw = _Raw(path, split.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), split, True, fsync)
    return WriteStream(raw, buffer_size=FILE_BUFFER)


def local_read_stream(path: str, split: io.Split) -> BinaryIO:
    """A file as an engine's seekable read stream, its calls timed into `split`, buffered as `open(path, "rb")`
    buffers (the file system's block size, else io's default): what `torch.load(path)` reads through (it opens
    the path so and hands its C++ reader that stream: small reads of the archive's headers gathered, each record
    read straight into its storage). A buffer of the point's I/O block (16 MiB) read ahead 16 MiB at a time and
    copied each record once more: 1.3-1.4x the same loads' time on the same files (benchmarks/RESULTS.md)."""
    fd = split.open(path, os.O_RDONLY)
    return pyio.BufferedReader(_Raw(path, fd, split, False, False), buffer_size=read_buffer(fd))


def read_buffer(fd: int) -> int:
    """The buffer `open()` gives a file: its st_blksize where above 1, else io.DEFAULT_BUFFER_SIZE."""
    size = os.fstat(fd).st_blksize
    return size if size > 1 else pyio.DEFAULT_BUFFER_SIZE


def _gib(n: float) -> str:
    return format_bytes(n, 3)
