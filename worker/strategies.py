"""Checkpoint write paths that let training go on: async (host-memory snapshot, persisted by a thread)
and tiered (node-local tier write, drained to shared storage by every rank or one drainer per node).

One checkpoint on one rank: idle training steps (nothing in the background, off the clock) → the clock
starts → the blocking part (snapshot copy or tier write) → the background part starts in a thread while
the main thread runs simulated training steps (`worker.compute`: device compute, then a gradient
all-reduce) → every rank keeps stepping until every rank's background part is done (each step's
all-reduce carries the rank's "done" flag, so all stop on the same step and only the main thread calls
MPI) → idle steps again → the rank's end stamp is the moment its own background part finished: the
checkpoint is durable on shared storage. The step samples give the interference (`worker.interference`).
Every rank takes part in every collective even after an error, so a failure is voted on, never hung.

An engine point (`worker.engine_point`) blocks for what its engine's async call blocks for (torch_save: a host
snapshot; dcp: `async_save`'s return, its staging recorded apart) and persists in the engine's own thread or
process, which the background thread here waits on; tiered, the engine saves to the node-local tier and the
drain copies the engine's files (`files(step)`) to shared storage.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyctl import host
from studyctl.definition.checkpoint.layout import CheckpointFile, rank_files, step_dir_name
from studyctl.definition.checkpoint.points import IDLE_STEPS, WorkerTask
from studyctl.states import FailureClass
from studyctl.units import GIB
from worker import io, persist, stop
from worker.claim import placement_problem
from worker.compute import Trainer
from worker.engine_point import engine_tier, failure
from worker.interference import RankWrite
from worker.nodes import NodeMap, tier_place, tier_point_dir

if TYPE_CHECKING:
    from worker.engine_point import EnginePoint
    from worker.engines import AsyncHandle, AsyncTiming, PathTarget
    from worker.storage import Storage

Describe = Callable[[OSError, str], tuple[str, str]]
Problem = tuple[str, str]  # (a FailureClass value, one-line reason)


class Background:
    """A thread that runs `job` once, stamping its start and end with the phase clock."""

    def __init__(self, job: Callable[[], int], wtime: Callable[[], float]) -> None:
        self.job, self.wtime = job, wtime
        self.start = self.end = 0.0
        self.bytes = 0
        self.error: OSError | None = None
        self.failure: tuple[str, str] | None = None  # an engine's failure that is no OSError, in one line
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="checkpoint-background", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.start = self.wtime()
        try:
            self.bytes = self.job()
        except OSError as exc:
            self.error = exc
        except Exception as exc:  # a framework's own exception, reported as the phase's error
            self.failure = failure(exc, "the engine's background save")
        finally:
            self.end = self.wtime()
            self.done.set()


class AsyncWait:
    """An engine's async save, waited on by the background thread: its timing once complete."""

    def __init__(self, handle: AsyncHandle) -> None:
        self.handle = handle
        self.timing: AsyncTiming | None = None

    def wait_bytes(self) -> int:
        self.timing = self.handle.wait()
        return self.timing.nbytes


def write_files(paths: list[str], files: list[CheckpointFile], buf: io.Buffer, block: int, mode: str,
                split: io.Split) -> int:
    """Every file from the cycling buffer in `mode`; returns bytes written."""
    for path, f in zip(paths, files, strict=True):
        if mode == "buffered":
            io.write_buffered(path, f.nbytes, buf, block, split=split)
        else:
            io.write_direct(path, f.nbytes, buf, block, hybrid=mode == "hybrid", split=split)
    return sum(f.nbytes for f in files)


@dataclass
class WriteStrategy:
    """async or tiered checkpoints of one rank; `work` is the timed part of a write phase."""

    task: WorkerTask
    comm: Any
    nodes: NodeMap
    buf: io.Buffer
    io_mode: str  # on shared storage, as decided for the point
    describe: Describe
    wtime: Callable[[], float]
    point_dir: Path
    storage: Storage  # the shared target (files or objects): the persist and the drain write through it
    engine: EnginePoint | None = None  # an engine point's framework, which writes in place of the byte loops
    trainer: Trainer = field(init=False)
    snapshot: persist.Snapshot | None = field(init=False, default=None)
    drain_buf: io.Buffer | None = field(init=False, default=None)
    tier_dir: Path | None = field(init=False, default=None)
    tier_mode: str | None = field(init=False, default=None)
    tier_fstype: str | None = field(init=False, default=None)  # the tier's real mount type, for the result
    tier_target: PathTarget | None = field(init=False, default=None)  # an engine's files on the tier
    handle: AsyncWait | None = field(init=False, default=None)  # an engine's async save in flight
    tier_save_s: float = field(init=False, default=0.0)  # an engine's last save to the tier
    tier_storage_s: float | None = field(init=False, default=None)  # of it, inside the storage calls

    def __post_init__(self) -> None:
        point = self.task.point
        opts = point.checkpoint
        self.rank = self.comm.Get_rank()
        self.par = point.parallelism
        self.files = rank_files(point.model, self.par, self.rank, opts.scale, opts.naming, opts.convention)
        self.block = opts.block_mib * (1 << 20)
        self.trainer = Trainer(self.comm, opts.step_s or 0.5, opts.compute or "accelerator", opts.allreduce_mib or 0.0,
                               opts.dispatch_share, opts.device)

    @property
    def opts(self) -> Any:
        return self.task.point.checkpoint

    def setup(self) -> Problem | None:
        """Allocate (snapshot, drain buffer, tier directory) and calibrate the step; every rank returns the
        first rank's reason when one cannot."""
        problem = self._allocate()
        problems = [p for p in self.comm.allgather(problem) if p]
        if problems:
            return problems[0]
        self.comm.Barrier()  # every rank calibrates at once, as every rank computes at once in training
        self.trainer.calibrate()
        return None

    @property
    def background_threads(self) -> int:
        """Threads this rank runs beside training: a persist thread (async), a drain and its reader (tiered)."""
        if self.opts.strategy == "async":
            return 1 if self.files else 0
        drains = self.nodes.leader if self.opts.drain == "node" else bool(self.files)
        return 2 if drains else 0

    def _allocate(self) -> Problem | None:
        try:
            if self.opts.strategy == "async" and self.engine is not None:
                return None  # the engine's own snapshot or stager (planned: `engines.engine_tensor_bytes`)
            if self.opts.strategy == "async":
                problem = _memory_problem(self.nodes, 2 * sum(persist.aligned(f.nbytes) for f in self.files))
                if problem is None:
                    self.snapshot = persist.Snapshot([f.nbytes for f in self.files])
                return (FailureClass.CONFIG.value, problem) if problem else None
            assert self.task.tier_path is not None
            misplaced = placement_problem(self.task.tier_path, self.task.tier_kind)
            if misplaced:
                return FailureClass.CONFIG.value, f"tier {misplaced}"
            self.tier_dir = tier_point_dir(self.task, self.nodes.name)
            self.tier_dir.mkdir(parents=True, exist_ok=True)
            self.tier_fstype = host.mount_of(str(self.tier_dir))["fstype"]
            if not self.opts.keep:  # a point that keeps its files keeps them when stopped too
                stop.own(tier_place(self.task, self.nodes.name), self.tier_dir.name)
            wants_direct = self.io_mode != "buffered"
            self.tier_mode = self.io_mode if wants_direct and io.direct_supported(str(self.tier_dir)) else "buffered"
            self.drain_buf = io.Buffer.allocate(self.opts.buffer_mib * (1 << 20))
            if self.engine is not None:
                tier_dir, naming = self.tier_dir, self.opts.naming
                self.tier_target = engine_tier(lambda i: tier_dir / step_dir_name(i, naming), self.opts.fsync)
            problem = self._tier_space_problem() if self.nodes.leader else None
            return (FailureClass.INSUFFICIENT_SPACE.value, problem) if problem else None
        except OSError as exc:
            return FailureClass.IO_ERROR.value, f"{exc.strerror or exc} on {exc.filename or self.task.tier_path}"

    def _tier_space_problem(self) -> str | None:
        """The node's tier holds `tier_keep` checkpoints of its ranks, plus the one being written."""
        assert self.tier_dir is not None
        point = self.task.point
        node_bytes = sum(f.nbytes for r in self.nodes.ranks
                         for f in rank_files(point.model, self.par, r, self.opts.scale, self.opts.naming,
                                            self.opts.convention))
        need = node_bytes * min(self.opts.tier_keep + 1, max(self.opts.writes, 1))
        free, total = host.free_and_total(str(self.tier_dir))
        if total and free < need:
            return (f"not enough space on the tier of node {self.nodes.name} ({self.tier_dir}): need "
                    f"{need / GIB:.2f} GiB ({min(self.opts.tier_keep + 1, self.opts.writes)} checkpoint(s) of its "
                    f"ranks), have {free / GIB:.2f} GiB free")
        return None

    def prepare(self, step: str, tag: int) -> None:
        """Off the clock: the tier's step directory; snapshot pages resident, the state's pages new."""
        if self.tier_dir is not None:
            (self.tier_dir / step).mkdir(exist_ok=True)
        if self.snapshot is not None:
            self.snapshot.prepare(tag)

    def work(self, ph: Any, index: int, step: str) -> None:
        """The timed checkpoint between idle steps; sets ph.start, ph.bytes, ph.files, ph.error, ph.end_at and
        ph.extra (a RankWrite). The idle steps' all-reduces line the ranks up, as the phase's barrier did.
        ph.split sums this rank's own files from start to its end stamp: the tier write (blocking) and the drain
        (tiered; with drain: node the drainer's holds every file of its node it drains), or the persist thread's
        writes (async; the snapshot copy is in `other_s`). The background part runs after the blocking part on
        one thread at a time, so the parts stay within the rank's duration."""
        before = self.trainer.run(IDLE_STEPS)
        ph.split = self.storage.begin(ph)
        ph.start = self.wtime()
        if ph.error is None:
            self._blocking(ph, index, step)
        blocking_end = self.wtime()
        if self.opts.strategy == "tiered" and self.opts.drain == "node":
            self.nodes.comm.Barrier()  # the node's drainer reads files its peers wrote
        drained = self._engine_drains(index, ph)
        job = self._background_job(step, ph.split, drained) if ph.error is None else None
        bg = Background(job, self.wtime) if job is not None else None
        window = self.trainer.run_until(lambda: bg is None or bg.done.is_set())
        after = self.trainer.run(IDLE_STEPS)
        if bg is not None:
            bg.thread.join()
            if bg.error is not None:
                ph.error = self.describe(bg.error, bg.error.filename or str(self.point_dir))
            elif bg.failure is not None:
                ph.error = bg.failure
        if self.engine is not None:
            self._engine_recorded(ph, index, bg)
        ph.end_at = bg.end if bg is not None else blocking_end
        ph.extra = RankWrite(blocking_s=blocking_end - ph.start, background_s=(bg.end - bg.start) if bg else 0.0,
                             background_bytes=bg.bytes if bg else 0, window=window.steps,
                             idle=before.steps + after.steps, compute_wall_s=window.compute_wall_s,
                             compute_cpu_s=window.compute_cpu_s, allreduce_bytes=window.allreduce_bytes)

    def _blocking(self, ph: Any, index: int, step: str) -> None:
        if self.engine is not None:
            self._engine_blocking(ph, index)
            return
        try:
            if self.snapshot is not None:
                self.snapshot.fill()
            else:
                assert self.tier_dir is not None and self.tier_mode is not None
                write_files([str(self.tier_dir / step / f.name) for f in self.files], self.files, self.buf,
                            self.block, self.tier_mode, ph.split)
        except OSError as exc:
            ph.error = self.describe(exc, exc.filename or str(self.tier_dir or self.point_dir))
            return
        ph.bytes = sum(f.nbytes for f in self.files)
        ph.files = len(self.files)

    def _background_job(self, step: str, split: io.Split, drained: list[CheckpointFile] | None = None
                        ) -> Callable[[], int] | None:
        storage = self.storage
        if self.handle is not None:
            return self.handle.wait_bytes
        if self.snapshot is not None:
            snap = self.snapshot

            def persist_snapshot() -> int:
                for i, f in enumerate(self.files):
                    storage.write_region(step, f.name, snap.region(i, f.nbytes), f.nbytes, split)
                return sum(f.nbytes for f in self.files)
            return persist_snapshot if self.files else None
        if self.opts.drain == "node":
            if not self.nodes.leader:
                return None
            point = self.task.point
            files = [f for r in self.nodes.ranks
                     for f in rank_files(point.model, self.par, r, self.opts.scale, self.opts.naming,
                                        self.opts.convention)]
        else:
            files = self.files
        if drained is not None:  # an engine's files, as it named them
            files = drained
        assert self.tier_dir is not None and self.drain_buf is not None
        tier, drain_buf = self.tier_dir / step, self.drain_buf

        def drain() -> int:
            for f in files:
                storage.drain_file(str(tier / f.name), step, f, drain_buf, split)
            return sum(f.nbytes for f in files)
        return drain if files else None

    def _engine_blocking(self, ph: Any, index: int) -> None:
        """What training waits for: the engine's async call (async), or its save to the tier (tiered)."""
        ep = self.engine
        assert ep is not None
        self.handle = None
        try:
            if self.opts.strategy == "async":
                ep.engine.target, ep.shared.split = ep.shared, ph.split if ep.streams else None
                self.handle = AsyncWait(ep.engine.async_save(index))
                return
            assert self.tier_target is not None
            split = ph.split if ep.streams else None
            ep.engine.target, self.tier_target.split = self.tier_target, split
            before = sum(split.seconds()) if split is not None else 0.0
            timing = ep.engine.save(index)
        except Exception as exc:  # a framework wraps OSErrors in its own exceptions
            ph.error = failure(exc, str(self.tier_dir or self.point_dir))
            return
        self.tier_save_s = timing.seconds
        # the save's own storage time: the drain adds its copies to the phase's split later
        self.tier_storage_s = sum(split.seconds()) - before if split is not None else None
        ph.bytes, ph.files = timing.nbytes, len(ep.engine.files(index))

    def _engine_drains(self, index: int, ph: Any) -> list[CheckpointFile] | None:
        """Tiered engine points: the files the rank drains (with drain node, its node's ranks', gathered on
        every rank of the node, error or not, as the gather is collective)."""
        ep = self.engine
        if ep is None or self.opts.strategy != "tiered":
            return None
        mine = [] if ph.error is not None else ep.engine.files(index)
        if self.opts.drain == "node":
            every = self.nodes.comm.allgather(mine)
            mine = [f for got in every for f in got] if self.nodes.leader else []
        return [CheckpointFile(name, n, "engine") for name, n in mine]

    def _engine_recorded(self, ph: Any, index: int, bg: Background | None) -> None:
        """The phase's bytes and files (async: once persisted) and the engine's record of the checkpoint."""
        ep = self.engine
        assert ep is not None
        got = self.handle.timing if self.handle is not None else None
        self.handle = None
        if got is None:  # tiered: the engine's save to the tier
            ep.note("write", index, ph, self.tier_save_s, storage_s=self.tier_storage_s)
            return
        if ph.error is None:
            ph.bytes, ph.files = got.nbytes, len(ep.engine.files(index))
        ep.note("write", index, ph, got.done_s, blocked_s=got.blocked_s, staged_s=got.staged_s, done_s=got.done_s)

    def after(self, index: int) -> None:
        """Off the clock, after the phase: the tier keeps only the last `tier_keep` checkpoints."""
        old = index - self.opts.tier_keep
        if self.tier_dir is not None and old >= 0 and self.nodes.leader:
            shutil.rmtree(self.tier_dir / step_dir_name(old, self.opts.naming), ignore_errors=True)

    def close(self) -> None:
        if self.snapshot is not None:
            self.snapshot.close()
        if self.drain_buf is not None:
            self.drain_buf.close()


def _memory_problem(nodes: NodeMap, snapshot_bytes: int) -> str | None:
    """The node's ranks' snapshots (and the simulated device state they copy) must fit in the memory the node
    has available now."""
    need = sum(nodes.comm.allgather(snapshot_bytes))
    available = host.available_memory()
    if nodes.leader and available is not None and need > available:
        return (f"async snapshots (and the simulated device state they copy) need {need / GIB:.2f} GiB of host "
                f"memory on node {nodes.name} "
                f"({len(nodes.ranks)} rank(s)), {available / GIB:.2f} GiB is available")
    return None
