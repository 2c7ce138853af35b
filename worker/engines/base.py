"""What every checkpoint engine offers the worker, and the settings it runs with.

An engine owns a rank's real tensors (`state.RankState`) and saves and restores them through a framework's own
call, timed as a training run sees it. The worker never asks which engine it holds: it allocates, saves (sync or
async), evicts and loads, and asks which files the engine wrote. Eviction is its own call, off the clock,
because a cold restore needs every rank's eviction done before any rank's timed load starts (DCP's ranks read
a file rank 0 wrote): the caller evicts, meets the other ranks, then loads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO, Literal, Protocol

from worker import io
from worker.engines.device import EngineConfigError
from worker.engines.state import RankState
from worker.storage import local_read_stream, local_write_stream

EngineName = Literal["torch_save", "dcp"]
StepPath = Callable[[int], Path]  # the directory of a checkpoint index (the storage's own naming)


class Target(Protocol):
    """Where an engine's files of a checkpoint index go: streams any engine can write and read (a POSIX
    directory or an object store's prefix, through the storage seam), and the directory where there is one
    (DCP's FileSystemWriter needs a path). `split`, when set, counts the time spent inside the storage calls."""

    split: io.Split | None

    def step_path(self, step: int) -> Path | None: ...

    def open_write(self, step: int, name: str) -> BinaryIO: ...

    def open_read(self, step: int, name: str) -> BinaryIO: ...


class PathTarget:
    """Files in a directory per checkpoint index (a node-local tier, a test's folder): plain buffered streams,
    fsynced on close when `fsync`."""

    def __init__(self, step_path: StepPath, fsync: bool = True) -> None:
        self._step_path, self.fsync = step_path, fsync
        self.split: io.Split | None = None

    def step_path(self, step: int) -> Path:
        return self._step_path(step)

    def open_write(self, step: int, name: str) -> BinaryIO:
        directory = self._step_path(step)
        directory.mkdir(parents=True, exist_ok=True)
        return local_write_stream(str(directory / name), self._split(), self.fsync)

    def open_read(self, step: int, name: str) -> BinaryIO:
        return local_read_stream(str(self._step_path(step) / name), self._split())

    def _split(self) -> io.Split:
        return self.split if self.split is not None else io.Split()


@dataclass(frozen=True)
class EngineOptions:
    """The checkpoint options an engine reads; names and defaults are the point's (`CheckpointOptions`)."""

    engine: str = "torch_save"
    device: str = "cpu"
    fsync: bool = True
    crc32: bool = True  # torch.save: a CRC-32 of every record (torch's default)
    pinned: bool = False  # device copies into pinned host memory (only with cuda)
    dcp_threads: int = 1  # DCP's FileSystemWriter writer threads
    stager_shared: bool = False  # DCP async: staged copies in shared memory
    stager_async: bool = False  # DCP async: staging in a background thread
    dcp_executor: str = "thread"  # DCP async: the upload in a thread or a process
    state: str = "megatron"  # whose state: torch.optim's (`torch`) or flat fp32 partitions (`megatron`)

    @classmethod
    def of(cls, opts: Any) -> EngineOptions:
        """From a point's checkpoint options (`CheckpointOptions`: every field here is one of its own)."""
        return cls(**{f.name: getattr(opts, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class Timing:
    """One rank's timed save or load: wall seconds from the call to its return, and the bytes of its files."""

    seconds: float
    nbytes: int


@dataclass(frozen=True)
class AsyncTiming:
    """One rank's async save, seconds from the call: training blocked until `blocked_s`; the state was staged
    (copied off the live tensors) at `staged_s`; the files were complete at `done_s`."""

    blocked_s: float
    staged_s: float
    done_s: float
    nbytes: int


class AsyncHandle:
    """An async save in flight: `blocked_s` is known at once; `staged()` and `done()` poll; `wait()` ends it."""

    def __init__(self, start: float, blocked_s: float, upload: Future[Any], staging: Future[Any] | None,
                 nbytes: Callable[[], int], finish: Callable[[], None] = lambda: None) -> None:
        self.blocked_s = blocked_s
        self._start = start
        self._upload = upload
        self._staging = staging
        self._nbytes = nbytes
        self._finish = finish
        self._staged_at = start + blocked_s if staging is None else None
        self._done_at: float | None = None
        if staging is not None:
            staging.add_done_callback(self._staged)
        upload.add_done_callback(self._uploaded)

    def _staged(self, _: Future[Any]) -> None:
        self._staged_at = time.perf_counter()

    def _uploaded(self, _: Future[Any]) -> None:
        self._done_at = time.perf_counter()

    def staged(self) -> bool:
        return self._staged_at is not None

    def done(self) -> bool:
        return self._upload.done()

    def wait(self) -> AsyncTiming:
        """Block until the files are complete (raising what the save raised)."""
        try:
            self._upload.result()
            if self._staging is not None:
                self._staging.result()
        finally:
            self._finish()
        done_at = self._done_at if self._done_at is not None else time.perf_counter()
        staged_at = self._staged_at if self._staged_at is not None else done_at
        return AsyncTiming(self.blocked_s, staged_at - self._start, done_at - self._start, self._nbytes())


class BaseEngine:
    """What the engines share: their state, options and step directories; eviction and byte counts follow
    from `files`."""

    def __init__(self, state: RankState, opts: EngineOptions, target: Target) -> None:
        self.state = state
        self.opts = opts
        self.target = target  # where the next save or load goes; the worker points it at a tier or shared storage
        self.metadata_fallback: StepPath | None = None  # dcp: where `.metadata` is when the target's step lacks it
        self.gpu = state.device.type == "cuda"

    def step_path(self, step: int) -> Path:
        path = self.target.step_path(step)
        if path is None:
            raise EngineConfigError(f"checkpoint.engine {self.opts.engine} needs a filesystem directory, and this "
                                    "target is an object store")
        return path

    def allocate(self) -> None:
        self.state.allocate()

    def files(self, step: int) -> list[tuple[str, int]]:
        raise NotImplementedError

    def evict(self, step: int) -> None:
        """Drop the cached pages of this rank's files of `step` (flushed first when the point does not fsync)."""
        for name, _ in self.files(step):
            io.evict(str(self.step_path(step) / name), flush=not self.opts.fsync)

    def nbytes(self, step: int) -> int:
        return sum(n for _, n in self.files(step))

    def forget(self, step: int) -> None:
        """The checkpoint was removed: nothing of it needs remembering."""

    def close(self) -> None:
        self.state.release()


class Engine(Protocol):
    """A rank's checkpoint engine (module docstring)."""

    name: EngineName
    state: RankState  # the rank's tensors: the worker's checksums and memory figures read them
    target: Target  # where the next save or load goes
    metadata_fallback: StepPath | None  # dcp: where `.metadata` is when the target's step lacks it

    def allocate(self) -> None:
        """Allocate and fill the rank's tensors on its device (off the clock)."""

    def save(self, step: int) -> Timing:
        """Save checkpoint `step` and return when it is complete (fsynced when the point fsyncs)."""

    def async_save(self, step: int) -> AsyncHandle:
        """Start saving checkpoint `step`; return when training may go on."""

    def evict(self, step: int) -> None:
        """Drop the cached pages of this rank's files of `step` (off the clock; before a cold load)."""

    def load(self, step: int, into: RankState | None = None) -> Timing:
        """Restore checkpoint `step` into `into` (default: the rank's own state) through the framework, timed;
        the bytes are what the framework read."""

    def files(self, step: int) -> list[tuple[str, int]]:
        """(name, bytes) of the files this rank wrote for `step`, as the engine named them."""

    def forget(self, step: int) -> None:
        """The checkpoint was removed: nothing of it needs remembering."""

    def close(self) -> None:
        """Free the tensors and whatever the engine set up."""
