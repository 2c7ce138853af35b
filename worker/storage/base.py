"""The one surface the worker reads and writes a point's checkpoints through, whatever holds them.

A point's checkpoints live in POSIX files (a directory per step) or in objects of an S3 store (a key per file).
The run, the write strategies, the restorer and the checkpoint engines ask the same handful of things of either:
set the target up, write a rank's files (from the cycling buffer, a snapshot region or a tier copy), read them
back, make them cold before a timed read, remove them; engines that serialise real tensors also stream their
own files in and out and list what they wrote. `Storage` is the whole of that surface, so the code above it never
asks which target it holds, and engine × target is a composition, not a cross product of branches. One
implementation is chosen per run (`worker.storage.open_storage`); every timed call adds its time to the phase's
`io.Split` as the target accounts it (open/transfer/fsync/close for files, transfer for requests).
"""

from __future__ import annotations

import io as pyio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Protocol

from studyctl.definition.checkpoint.layout import CheckpointFile
from studyctl.definition.checkpoint.points import ColdReadMethod
from worker import io

Describe = Callable[[OSError, str], tuple[str, str]]


@dataclass(frozen=True)
class Setup:
    """What rank 0 decided before any data moved; broadcast to every rank."""

    error: tuple[str, str] | None
    io_mode: str
    fallback_reason: str | None
    cold_read: ColdReadMethod
    free_before: int
    total: int


@dataclass(frozen=True)
class Mount:
    """What the result records of the target after the run: free and total bytes (0: the target reports none),
    the mount's fields, the server cache's treatment (objects; None for files)."""

    free_after: int
    total: int
    mount: dict[str, str]
    server_cache: str | None


class Chunks(Protocol):
    """One file read piece by piece at increasing offsets (a broadcast restore's root)."""

    def read(self, offset: int, into: memoryview) -> None:
        """The file's bytes of [offset, offset + len(into)) into `into` (past its end: what there is)."""

    def close(self) -> None: ...


class Storage(Protocol):
    """A point's checkpoints on one target, for one rank. Steps are DLIO's step directory names, files their
    DLIO names (or an engine's own)."""

    # -- set-up, every rank together
    def decide(self, checkpoint_bytes: int) -> Setup:
        """Rank 0, before any data moves: the target ready (and claimed) or the reason it cannot be; never raises."""

    def use(self, setup: Setup) -> None:
        """Every rank, once rank 0's decision is broadcast: the I/O mode and cold-read method to run with."""

    def mount(self) -> Mount:
        """Rank 0, for the result: the target as it stands after the run."""

    # -- the timed phases
    def begin(self, ph: Any) -> io.Split:
        """A phase's split (and request counts), attached to `ph`."""

    def where(self, step: str, name: str) -> str:
        """A file's path or URL, for messages."""

    def prepare_step(self, step: str) -> None:
        """Off the clock, before a step is written (its directory)."""

    def write_file(self, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> None:
        """One file of `f.nbytes` from the rank's cycling buffer, in the point's I/O mode (fsynced as it says)."""

    def write_region(self, step: str, name: str, region: memoryview, nbytes: int, split: io.Split) -> None:
        """One file from a snapshot region (async persist; always made durable)."""

    def drain_file(self, source: str, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> None:
        """A node-local tier file (`source`) to the target (tiered drain); `buf` may be used for the copy."""

    def read_file(self, step: str, f: CheckpointFile, buf: io.Buffer, split: io.Split) -> int:
        """One whole file into the cycling buffer (its bytes discarded), cold as the point reads; bytes read."""

    def open_chunks(self, step: str, f: CheckpointFile, split: io.Split) -> Chunks:
        """One file to read piece by piece (a broadcast's root); OSError where it cannot be opened."""

    def make_cold(self, step: str, names: Sequence[str]) -> None:
        """Off the clock before a timed read of these files: what the point's cold-read method asks for (the
        page cache evicted; the server's cache dropped, where it can be, by rank 0)."""

    def resident(self, step: str, names: Sequence[str]) -> tuple[int, int] | None:
        """Off the clock, right before a timed read of these files (after make_cold): (pages in the page cache,
        pages sampled) over them (worker.residency); None where the target has no page cache to ask (objects)."""

    def remove_step(self, step: str, names: Sequence[str]) -> None:
        """Off the clock: a checkpoint no restore reads (this rank's files of it, or the step)."""

    def remove_point(self) -> None:
        """Rank 0: everything of the point on the target; a target that cannot be asked now is left quietly to
        the next command's clean-up."""

    def close(self) -> None: ...

    # -- for the checkpoint engines (real tensors, their own serialisation and file names)
    def step_path(self, step: str) -> Path | None:
        """The step's directory, for an engine that needs paths; None where the target has none (objects)."""

    def list_step(self, step: str) -> list[tuple[str, int]]:
        """(name, bytes) of every file the step holds, by name: what an engine actually wrote."""

    def open_write(self, step: str, name: str, split: io.Split | None = None) -> BinaryIO:
        """A binary stream that becomes the file; durable once closed (fsynced where the point fsyncs; an object
        completed). An error, or closing after one, leaves no partial object."""

    def open_read(self, step: str, name: str, split: io.Split | None = None) -> BinaryIO:
        """A seekable binary stream of the file."""


class Discardable(Protocol):
    def discard(self) -> None:
        """Drop what was written: later writes are ignored, closing leaves no file or object."""


class WriteStream(pyio.BufferedWriter):
    """An engine's write stream: buffered, and discarded (no partial file or object) when the `with` block it
    is used in raises: a serialiser that fails halfway must not leave a checkpoint that looks whole."""

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is not None:
            raw: Discardable = self.raw  # type: ignore[assignment]
            raw.discard()
        super().__exit__(kind, error, trace)


def write_files(storage: Storage, describe: Describe, ph: Any, step: str, files: Sequence[CheckpointFile],
                buf: io.Buffer) -> None:
    """The timed write of a sync checkpoint: every file of the rank; the first failure ends it, in `ph.error`."""
    split = storage.begin(ph)
    for f in files:
        try:
            storage.write_file(step, f, buf, split)
        except OSError as exc:
            ph.error = describe(exc, storage.where(step, f.name))
            return
        ph.bytes += f.nbytes
        ph.files += 1


def read_files(storage: Storage, describe: Describe, ph: Any, step: str, files: Sequence[CheckpointFile],
               buf: io.Buffer) -> None:
    """The timed restore: every file the rank holds afterwards, read whole into the buffer."""
    split = storage.begin(ph)
    for f in files:
        try:
            ph.bytes += storage.read_file(step, f, buf, split)
        except OSError as exc:
            ph.error = describe(exc, storage.where(step, f.name))
            return
        ph.files += 1
