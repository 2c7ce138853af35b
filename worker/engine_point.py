"""A point whose checkpoints go through a training framework (`checkpoint.engine` torch_save or dcp): the rank's
real tensors, saved and restored by `worker.engines`, timed by the run's own phases.

Everything the run does for `stream` it does here with the engine's call in place of the raw-byte loop: the
phase's barrier, per-rank stamps and error vote; bytes and files are what the engine wrote or read. The tensors
are allocated once, off the clock (the state saved, and the state a restore fills: its own files and, with
restore full or broadcast, the replicated ones its DP replicas share). The engine writes through the storage
seam's streams (torch_save: files or objects) or into the step's directory (dcp); a stream's storage calls
are counted in the phase's split, so the framework's own share is the rest. A tiered point's engine writes to
the node-local tier instead (`worker.strategies`), and a restore reads its tier where the node still holds
every file it needs, else shared storage.

Restores: `rank` and `full` load the files `points.restore_files` names through the engine; `broadcast` loads
the rank's own files, the group's root also the replicated ones, which it then MPI_Bcasts tensor by tensor.
With the environment variable STUDYCTL_VERIFY_RESTORES set, every restore's tensors are compared with the
saved ones (per-file hashes, off the clock): a difference fails the point.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from studyctl.definition.checkpoint.engine_tensors import file_tensors, read_tensors
from studyctl.definition.checkpoint.engines import DCP_METADATA, dcp_file_names
from studyctl.definition.checkpoint.layout import CheckpointFile, step_dir_name
from studyctl.definition.checkpoint.points import WorkerTask, restore_files
from studyctl.definition.checkpoint.restore_rules import restore_rule
from studyctl.definition.result.result_fields import EngineInfo, EngineTiming
from studyctl.states import FailureClass
from worker import io, residency
from worker.clock import WorkerFailure

if TYPE_CHECKING:
    from worker.engines import Engine, PathTarget, RankState
    from worker.storage import Storage

VERIFY_ENV = "STUDYCTL_VERIFY_RESTORES"


class SeamTarget:
    """The engine's files of checkpoint index `i` in the seam's step `step_dir_name(i)`."""

    def __init__(self, storage: Storage, naming: Any) -> None:
        self.storage, self.naming = storage, naming
        self.split: io.Split | None = None

    def step(self, index: int) -> str:
        return step_dir_name(index, self.naming)

    def step_path(self, index: int) -> Path | None:
        return self.storage.step_path(self.step(index))

    def open_write(self, index: int, name: str) -> BinaryIO:
        return self.storage.open_write(self.step(index), name, self.split)

    def open_read(self, index: int, name: str) -> BinaryIO:
        return self.storage.open_read(self.step(index), name, self.split)


@dataclass
class EngineRecord:
    """One rank's engine figures of one checkpoint or restore (gathered by rank 0 for the result)."""

    phase: str
    index: int
    nbytes: int
    files: int
    storage_s: float | None  # inside the seam's streams (None: the engine wrote paths itself)
    duration_s: float
    blocked_s: float | None = None  # async: the async call's return
    staged_s: float | None = None
    done_s: float | None = None
    verified: bool | None = None
    cpu_s: float | None = None  # sync save, restore: the process's CPU in the call (every thread of it)
    minor_faults: int | None = None  # ... and the fresh pages it touched (or mapped from the page cache)


class CallCost:
    """The process's CPU seconds and minor page faults over a call: what a framework's serialising and host copies
    cost the host, and whether they land in memory touched before (a job's later checkpoints) or fresh pages."""

    def __enter__(self) -> CallCost:
        self.cpu, self.faults = time.process_time(), _minor_faults()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu_s, self.minor_faults = time.process_time() - self.cpu, _minor_faults() - self.faults


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@dataclass
class EnginePoint:
    """One rank's engine for the point, and what it restores into."""

    task: WorkerTask
    comm: Any
    storage: Storage
    engine: Engine
    shared: SeamTarget
    own: list[CheckpointFile]  # what this rank restores itself (restore_files, or broadcast's own part)
    bcast: list[CheckpointFile]  # broadcast: the files its group's root loads and broadcasts
    group: Any = None  # broadcast: the communicator of the rank's replica group
    restored: RankState | None = None
    received: RankState | None = None
    records: list[EngineRecord] = field(default_factory=list)
    saved: dict[int, dict[str, str]] = field(default_factory=dict)  # verify: per checkpoint, file → hash

    @property
    def root(self) -> bool:
        return self.group is None or self.group.Get_rank() == 0

    def names(self, index: int) -> list[str]:
        """The files this rank wrote of checkpoint `index` (what removing it removes): DCP's by its naming
        (`engines.dcp_file_names`, `.metadata` on rank 0), torch_save's as it saved them."""
        if self.engine.name == "dcp":
            rank = self.comm.Get_rank()
            return dcp_file_names(rank, self.task.point.checkpoint.dcp_threads) + ([DCP_METADATA] if rank == 0 else [])
        return [name for name, _ in self.engine.files(index)]

    def allocate(self) -> None:
        """Off the clock: the state to save, and the states restores fill."""
        self.engine.allocate()
        if self.restored is not None:
            self.restored.allocate(fill=False)
        if self.received is not None and not self.root:
            self.received.allocate(fill=False)

    # -- writes
    def save(self, ph: Any, index: int) -> None:
        """The timed sync save (the phase's work)."""
        self.shared.split = ph.split = self.storage.begin(ph) if self.streams else None
        self.engine.target = self.shared
        try:
            with CallCost() as cost:
                timing = self.engine.save(index)
        except Exception as exc:  # a framework wraps OSErrors in its own exceptions
            ph.error = failure(exc, self.storage.where(self.shared.step(index), ""))
            return
        ph.bytes, ph.files = timing.nbytes, len(self.engine.files(index))
        self.note("write", index, ph, timing.seconds, cpu_s=cost.cpu_s, minor_faults=cost.minor_faults)

    @property
    def streams(self) -> bool:
        """The engine writes through the seam's streams (torch_save); dcp writes the step's directory."""
        return self.engine.name == "torch_save"

    def note(self, phase: str, index: int, ph: Any, seconds: float, storage_s: float | None = None,
             **extra: Any) -> None:
        """The record of a checkpoint or restore; its storage time is the phase split's unless `storage_s` says
        what of it the engine's call spent (a tiered save's: the drain adds to the same split)."""
        if storage_s is None and ph.split is not None and self.streams:
            storage_s = sum(ph.split.seconds())
        self.records.append(EngineRecord(phase, index, ph.bytes, ph.files, storage_s, seconds, **extra))

    def after_write(self, index: int) -> None:
        """Off the clock: with verification on, every rank's per-file hashes of what it saved."""
        if os.environ.get(VERIFY_ENV):
            merged: dict[str, str] = {}
            for got in self.comm.allgather(self.engine.state.file_digests()):
                merged.update(got)
            self.saved[index] = merged

    # -- restores
    def _read_paths(self, index: int, target: Any, names: list[str]) -> list[str] | None:
        """The files this rank's restore reads, where they are files (None: an object store's)."""
        directory = target.step_path(index)
        if directory is None:
            return None
        if self.engine.name == "dcp":  # DCP's ranks read every file their records are in, and .metadata
            names = [e.name for e in os.scandir(directory) if e.is_file()]
        return [str(directory / name) for name in names if (directory / name).exists()]

    def prepare_read(self, index: int, target: Any, names: list[str]) -> None:
        """Off the clock: the files this rank reads made cold (a directory's pages evicted; an object store's
        server cache dropped by the seam)."""
        paths = self._read_paths(index, target, names)
        if paths is None:
            self.storage.make_cold(self.shared.step(index), names)
            return
        for path in paths:
            io.evict(path, flush=not self.task.point.checkpoint.fsync)

    def sample_read(self, index: int, target: Any, names: list[str]) -> tuple[int, int] | None:
        """Off the clock, after prepare_read: the residency sample of those files (worker.residency)."""
        paths = self._read_paths(index, target, names)
        return None if paths is None else residency.resident(paths)

    def load(self, ph: Any, index: int, target: Any) -> tuple[float, float, int]:
        """The timed restore into the allocated state; returns (load seconds, broadcast seconds, bytes received)."""
        assert self.restored is not None
        target.split = ph.split = self.storage.begin(ph) if self.streams else None
        self.engine.target = target
        self.engine.metadata_fallback = self.shared.step_path  # type: ignore[assignment]  # dcp: a directory
        timing = None
        try:
            with CallCost() as cost:
                timing = self.engine.load(index, self.restored)
        except Exception as exc:  # as in save
            ph.error = failure(exc, self.storage.where(self.shared.step(index), ""))
        # ZeRO-3 replicates nothing: its groups have no files to broadcast
        bcast_s, received = self._broadcast() if self.group is not None and self.bcast else (0.0, 0)
        if timing is not None:  # what it read, and what it received (a broadcast's, as stream counts it)
            ph.bytes, ph.files = timing.nbytes + received, len(self.restored.plan) + bool(received) * len(self.bcast)
            self.note("read", index, ph, timing.seconds, cpu_s=cost.cpu_s, minor_faults=cost.minor_faults)
        return (timing.seconds if timing else 0.0), bcast_s, received

    def _broadcast(self) -> tuple[float, int]:
        """The group's root sends the replicated tensors it loaded, the others receive them (every rank calls
        it, whatever failed, so no rank waits forever)."""
        from mpi4py import MPI

        from worker.engines.state import as_bytes

        assert self.received is not None and self.restored is not None
        source = self.restored if self.root else self.received
        start = MPI.Wtime()
        received = 0
        for f in self.received.plan:
            for t in f.tensors:
                data = as_bytes(source.files[f.file.name][t.name])
                self.group.Bcast([data.numpy(), MPI.BYTE], root=0)
                received += 0 if self.root else data.numel()
        return MPI.Wtime() - start, received

    def read_phase(self, index: int, tier: Any | None
                   ) -> tuple[Callable[[], object], Callable[[Any], None], Callable[[], tuple[int, int] | None]]:
        """(off-clock preparation, timed work, residency sample) of a restore of checkpoint `index`: from the
        node-local tier (`tier`: its target) where it holds every file this rank reads, else from shared
        storage."""
        assert self.restored is not None
        names = [f.file.name for f in self.restored.plan]
        from_tier = tier is not None and self._on_tier(index, tier, names)
        target = tier if from_tier else self.shared

        def work(ph: Any) -> None:
            read_s, bcast_s, received = self.load(ph, index, target)
            ph.extra = (ph.bytes * from_tier, ph.bytes * (not from_tier), read_s, bcast_s, received)
        return (partial(self.prepare_read, index, target, names), work,
                partial(self.sample_read, index, target, names))

    def _on_tier(self, index: int, tier: Any, names: list[str]) -> bool:
        """The tier holds what this rank reads: its files (torch_save), or its own DCP files for a restore of
        its own records (rank, unshifted: DCP reads `.metadata` from shared storage when the tier lacks it)."""
        directory = tier.step_path(index)
        if self.engine.name == "dcp":
            opts = self.task.point.checkpoint
            if restore_rule(opts.restore).every_rank_holds_shared or opts.rank_shift:
                return False
            names = [n for n in self.names(index) if n != DCP_METADATA]
        return all((directory / n).exists() for n in names)

    def verify(self, index: int, saved_index: int) -> None:
        """Off the clock (with verification on): every restored file's tensors equal what was saved; a
        difference anywhere fails the point on every rank."""
        if not os.environ.get(VERIFY_ENV):
            return
        assert self.restored is not None
        got = self.restored.file_digests()
        if self.received is not None and not self.root:
            got.update(self.received.file_digests())
        bad = sorted(n for n, h in got.items() if self.saved[saved_index].get(n) != h)
        self.records[-1].verified = not bad
        problems = [p for p in self.comm.allgather(bad[:1]) if p]
        if problems:
            raise WorkerFailure(FailureClass.IO_ERROR, f"restore {index}: {problems[0][0]} differs from what "
                                f"checkpoint {saved_index} saved")

    def info(self) -> EngineInfo | None:
        """Collective: every rank's records, and rank 0 gets the result's engine section (others None)."""
        import torch

        state = self.engine.state
        mine = (len(state.tensors()), state.nbytes, self.records)
        every = self.comm.gather(mine, root=0)
        if every is None:
            return None
        opts = self.task.point.checkpoint
        records: dict[tuple[str, int], list[EngineRecord]] = {}
        for _, _, got in every:
            for r in got:
                records.setdefault((r.phase, r.index), []).append(r)
        return EngineInfo(engine=self.engine.name, device=opts.device, on_gpu=state.device.type == "cuda",
                          state=opts.state, replicated_writer=opts.replicated_writer, torch_version=torch.__version__,
                          tensors_per_rank_max=max(n for n, _, _ in every),
                          tensor_bytes_per_rank_max=max(b for _, b, _ in every),
                          checkpoints=[_timing(phase, index, rs) for (phase, index), rs in records.items()])

    def close(self) -> None:
        from worker.engines import end_group

        self.engine.close()
        for state in (self.restored, self.received):
            if state is not None:
                state.release()
        end_group()


Figure = TypeVar("Figure", int, float)


def _most(values: list[Figure | None]) -> Figure | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _timing(phase: str, index: int, rs: list[EngineRecord]) -> EngineTiming:
    """One checkpoint's records of every rank: bytes and files summed, seconds the slowest rank's."""
    verified = [r.verified for r in rs if r.verified is not None]
    return EngineTiming(phase=phase, index=index,  # type: ignore[arg-type]  # "write" or "read"
                        bytes=sum(r.nbytes for r in rs), files=sum(r.files for r in rs),
                        engine_s=max(r.duration_s for r in rs), storage_s=_most([r.storage_s for r in rs]),
                        blocked_s=_most([r.blocked_s for r in rs]), staged_s=_most([r.staged_s for r in rs]),
                        persist_s=_most([r.done_s for r in rs]), verified=all(verified) if verified else None,
                        cpu_s=_most([r.cpu_s for r in rs]), minor_faults=_most([r.minor_faults for r in rs]))


def failure(exc: BaseException, where: str) -> tuple[str, str]:
    """A framework's failure as the phase's error: one line (an OSError's own words where it is one)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError):
        return FailureClass.IO_ERROR.value, f"{cause.strerror or cause} on {cause.filename or where}"
    text = " ".join(str(exc).split())[:400]
    return FailureClass.IO_ERROR.value, f"{type(exc).__name__}: {text} ({where})"


def open_engine(task: WorkerTask, comm: Any, storage: Storage) -> EnginePoint | None:
    """This rank's engine of an engine point (None for stream), its tensors not yet allocated. A device or
    target the engine cannot have fails the point as a configuration error before anything is written."""
    opts = task.point.checkpoint
    if opts.engine == "stream":
        return None
    from worker.engines import EngineConfigError, EngineOptions, RankState, make_engine
    from worker.restore import broadcast_split

    point, rank = task.point, comm.Get_rank()
    m, par, conv = point.model, point.parallelism, opts.convention
    shared = SeamTarget(storage, opts.naming)
    try:
        plan = file_tensors(m, par, rank, opts.scale, opts.naming, conv=conv)
        engine = make_engine(EngineOptions.of(opts), plan, shared, comm)
    except EngineConfigError as exc:
        raise WorkerFailure(FailureClass.CONFIG, str(exc)) from exc
    source = (rank + opts.rank_shift) % par.ranks
    writers = [source, *range(source % par.model_parallel, par.ranks, par.model_parallel)]
    group, bcast = None, list[CheckpointFile]()
    own = restore_files(m, par, rank, opts)
    if restore_rule(opts.restore).broadcasts:
        colour, own, bcast = broadcast_split(point, par, rank)
        group = comm.Split(color=colour, key=rank)
    ep = EnginePoint(task, comm, storage, engine, shared, own, bcast, group)
    if opts.reads:
        root = group is None or group.Get_rank() == 0
        loads = own + (bcast if root else [])
        ep.restored = RankState(read_tensors(m, par, writers, loads, opts.scale, opts.naming, conv),
                                engine.state.device, seed=rank)
        if bcast:
            ep.received = RankState(read_tensors(m, par, writers, bcast, opts.scale, opts.naming, conv),
                                    engine.state.device, seed=rank)
    return ep


def engine_tier(step_path: Callable[[int], Path], fsync: bool) -> PathTarget:
    """An engine's files on a node-local tier: a directory per checkpoint index."""
    from worker.engines import PathTarget

    return PathTarget(step_path, fsync)
