"""The checkpoint worker: every MPI rank writes its files of `writes` checkpoints, then restores.

Per checkpoint: Barrier → per-rank start → write every file (fsync each) → per-rank end → an
allgather that is both the closing barrier and the error vote, so no rank waits forever on a
rank that failed. Work off the clock (step directories, page eviction, deleting steps no restore
reads) reports its errors into the next vote, so a failure on one rank is every rank's failure.
Memory is one buffer per rank whatever the checkpoint size.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from studyctl.fsutil import atomic_write_text
from studyctl.spec.layout import CheckpointFile, Parallelism, rank_files, summarize
from studyctl.spec.plan import disk_steps_needed
from studyctl.spec.points import Point, WorkerTask
from studyctl.states import FailureClass
from studyctl.units import MIB, format_bytes
from worker import io, provenance
from worker.claim import CLAIMS, claim, placement_problem, release
from worker.result import (
    SCHEMA_VERSION,
    FilesystemInfo,
    IoInfo,
    Provenance,
    Result,
    SizeInfo,
    WorkerError,
)
from worker.timing import checkpoint_timing, dlio_compat, phase_summary


class WorkerFailure(Exception):
    """A failure the worker understood; every rank raises it together."""

    def __init__(self, failure_class: FailureClass, reason: str) -> None:
        super().__init__(reason)
        self.failure_class = failure_class
        self.reason = reason


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _gib(n: float) -> str:
    return format_bytes(n, 3)


@dataclass(frozen=True)
class Setup:
    """What rank 0 decided before any data moved; broadcast to every rank."""

    error: tuple[str, str] | None
    io_mode: str
    fallback_reason: str | None
    cold_read: str
    free_before: int
    total: int


def restore_files(point: Point, par: Parallelism, rank: int) -> list[CheckpointFile]:
    """What `rank` reads on restore: its partner's files, plus DP replica 0's weights with restore 'full'."""
    opts = point.checkpoint
    source = (rank + opts.rank_shift) % par.world_size
    files = rank_files(point.model, par, source, opts.scale)
    if opts.restore == "full" and par.zero_stage < 3 and par.coords(source)[2] != 0:
        replica0 = source % par.model_parallel
        kinds = ("model", "optimizer") if par.zero_stage == 0 else ("model",)
        files += [f for f in rank_files(point.model, par, replica0, opts.scale) if f.kind in kinds]
    return files


def _decide(task: WorkerTask, point_dir: Path, checkpoint_bytes: int) -> Setup:
    """Rank 0: create the point directory, check free space and O_DIRECT; never raises."""
    point = task.point
    opts = point.checkpoint
    io_mode, fallback, cold = point.io_mode, None, opts.cold_read
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
    free, total = provenance.free_and_total(str(point_dir))
    steps = disk_steps_needed(opts.writes, opts.reads, opts.keep)
    need = checkpoint_bytes * steps
    required = int(need * (1 + opts.free_space_margin))
    if total and free < required:  # total 0: the filesystem reports no capacity (ramfs, some FUSE)
        reason = (f"not enough free space on {task.filesystem_path}: need {_gib(required)} ({steps} checkpoint(s) "
                  f"of {_gib(checkpoint_bytes)} on disk at once + {opts.free_space_margin:.0%} margin), "
                  f"have {_gib(free)} free")
        return Setup((FailureClass.INSUFFICIENT_SPACE.value, reason), io_mode, None, "none", free, total)
    wants_direct = io_mode in ("direct", "hybrid") or cold == "direct"
    if wants_direct and not io.direct_supported(str(point_dir)):
        fstype = provenance.mount_of(str(point_dir))["fstype"]
        if not opts.direct_fallback:
            reason = (f"O_DIRECT refused by {task.filesystem_path} ({fstype}) for io_mode {io_mode}; "
                      "set checkpoint.direct_fallback: true to run buffered I/O instead")
            return Setup((FailureClass.DIRECT_IO_REFUSED.value, reason), io_mode, None, "none", free, total)
        fallback = f"O_DIRECT refused by {task.filesystem_path} ({fstype}): ran buffered with fadvise cold reads"
        io_mode = "buffered"
        cold = "fadvise" if cold in ("direct", "auto") else cold
    if cold == "auto":
        cold = "direct" if io_mode in ("direct", "hybrid") else "fadvise"
    return Setup(None, io_mode, fallback, cold, free, total)


def _describe_oserror(exc: OSError, path: str) -> tuple[str, str]:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return FailureClass.IO_ERROR.value, f"no space left while writing {path} ({exc.strerror})"
    if isinstance(exc, io.DirectIORefused):
        return FailureClass.DIRECT_IO_REFUSED.value, str(exc.strerror)
    return FailureClass.IO_ERROR.value, f"{exc.strerror or exc} on {path}"


class _Phase:
    """One timed checkpoint or restore on this rank."""

    def __init__(self) -> None:
        self.bytes = 0
        self.files = 0
        self.error: tuple[str, str] | None = None
        self.start = self.end = 0.0


def run_task(task_path: str) -> dict[str, Any]:
    """Entry point for every rank (mpiexec or one srun task each); raises WorkerFailure on known failures.

    An unexpected exception on one rank would leave the others blocked in a collective forever, so with
    more than one rank it records a worker_crash error, removes the point's files and aborts the job.
    """
    from mpi4py import MPI

    task = WorkerTask.model_validate_json(Path(task_path).read_text())
    comm = MPI.COMM_WORLD
    try:
        return _run_reporting(task, comm)
    finally:
        release(task)


def _run_reporting(task: WorkerTask, comm: Any) -> dict[str, Any]:
    """`_run`, with known failures recorded and unexpected ones turned into a crash record and an abort."""
    try:
        return _run(task, comm)
    except WorkerFailure as failure:
        if comm.Get_rank() == 0:
            _write_error(task, failure.failure_class.value, failure.reason)
        raise
    except Exception as exc:
        traceback.print_exc()
        try:
            _write_error(task, FailureClass.WORKER_CRASH.value, f"rank {comm.Get_rank()}: {type(exc).__name__}: {exc}")
            if CLAIMS or (comm.Get_rank() != 0 and task.point.world_size == comm.Get_size()):  # ours, claimed
                shutil.rmtree(_point_dir(task), ignore_errors=True)
                task.claim_file.unlink(missing_ok=True)  # the abort ends rank 0 too: its claim goes with it
        finally:
            if comm.Get_size() > 1:
                release(task)  # Abort ends this process before run_task's own release
                sys.stderr.flush()
                comm.Abort(1)
        raise


def _write_error(task: WorkerTask, failure_class: str, reason: str) -> None:
    record = WorkerError(schema_version=SCHEMA_VERSION, point_id=task.point_id, attempt=task.attempt,
                         failure_class=failure_class, reason=" ".join(reason.split())[:1000])
    atomic_write_text(Path(task.error_path), record.model_dump_json(indent=1))


def _point_dir(task: WorkerTask) -> Path:
    """The only directory the worker writes in or deletes."""
    return task.data_dir


def _run(task: WorkerTask, comm: Any) -> dict[str, Any]:
    point = task.point
    opts = point.checkpoint
    rank, size = comm.Get_rank(), comm.Get_size()
    if size != point.world_size:
        raise WorkerFailure(FailureClass.WORLD_SIZE_MISMATCH, (
            f"MPI world has {size} rank(s) but point {task.point_id} needs {point.world_size} "
            f"({point.nodes} nodes × {point.ranks_per_node}); under srun pass the right --mpi (pmi2 for the mpich "
            f"wheel, pmix for Open MPI), under mpiexec pass -n {point.world_size}"))
    problems = point.problems()
    if opts.reads and not opts.writes:
        problems.append("checkpoint.reads > 0 needs checkpoint.writes > 0 (restores read written checkpoints)")
    if problems:
        raise WorkerFailure(FailureClass.CONFIG, "; ".join(problems))
    started_at = _now()
    par = point.parallelism
    written = summarize(point.model, par, opts.scale)
    point_dir = _point_dir(task)
    setup = comm.bcast(_decide(task, point_dir, written.total_bytes) if rank == 0 else None, root=0)
    if setup.error:
        if rank == 0 and setup.error[0] not in (FailureClass.IO_ERROR.value, FailureClass.BUSY.value):
            shutil.rmtree(point_dir, ignore_errors=True)  # we created it; nothing else is in it yet
        raise WorkerFailure(FailureClass(setup.error[0]), setup.error[1])

    host = os.uname().nodename
    node, simulated = provenance.node_name(rank, point.ranks_per_node)
    my_files = rank_files(point.model, par, rank, opts.scale)
    my_reads = restore_files(point, par, rank)
    buf = io.Buffer.allocate(opts.buffer_mib * MIB)
    block = opts.block_mib * MIB
    kept = min(opts.writes, opts.reads)
    timings = []
    clock = _Clock(comm)
    try:
        for i in range(opts.writes):
            step = f"global_step{i}"
            paths = [str(point_dir / step / f.name) for f in my_files]

            def prepare(step: str = step, tag: int = i * 1_000_003 + rank) -> None:
                (point_dir / step).mkdir(exist_ok=True)
                buf.stamp(tag)  # every checkpoint's bytes differ; every buffer page touched before the clock

            timings.append(clock.phase("write", i, step, host, prepare, lambda ph, p=paths: _write_all(
                ph, p, my_files, buf, block, setup)))
            if i >= kept and not opts.keep:  # no restore reads this step: free its space now (off the clock)
                clock.off_clock(lambda p=paths: [Path(x).unlink(missing_ok=True) for x in p])
        for k in range(opts.reads):
            step = f"global_step{k % kept}"
            paths = [str(point_dir / step / f.name) for f in my_reads]
            evict = setup.cold_read == "fadvise"
            timings.append(clock.phase("read", k, step, host, lambda p=paths, e=evict: [io.evict(x) for x in p if e],
                                       lambda ph, p=paths: _read_all(ph, p, buf, block, setup.cold_read == "direct")))
        clock.vote()
    except WorkerFailure:
        comm.Barrier()
        if rank == 0:
            shutil.rmtree(point_dir, ignore_errors=True)
        raise
    finally:
        buf.close()

    hosts = comm.gather(host, root=0)
    nodes = comm.gather(node, root=0)
    read_bytes = comm.allreduce(sum(f.nbytes for f in my_reads))
    comm.Barrier()
    if rank == 0 and not opts.keep:
        shutil.rmtree(point_dir, ignore_errors=True)
    comm.Barrier()
    result: dict[str, Any] = {"point_id": task.point_id, "attempt": task.attempt, "rank": rank}
    if rank != 0:
        return result
    free_after, total = provenance.free_and_total(task.filesystem_path)
    mount = provenance.mount_of(task.filesystem_path)
    summary = {phase: phase_summary([t for t in timings if t.phase == phase])
               for phase in ("write", "read") if any(t.phase == phase for t in timings)}
    record = Result(
        schema_version=SCHEMA_VERSION, study=task.study, point_id=task.point_id, attempt=task.attempt, point=point,
        sizes=SizeInfo(scale=opts.scale, nominal_checkpoint_bytes=summarize(point.model, par, 1.0).total_bytes,
                       written_checkpoint_bytes=written.total_bytes, files_per_checkpoint=written.files_per_checkpoint,
                       bytes_per_rank_max=written.bytes_per_rank_max, bytes_per_rank_min=written.bytes_per_rank_min,
                       read_bytes_per_restore=read_bytes),
        io=IoInfo(io_mode_requested=point.io_mode, io_mode_used=setup.io_mode,
                  direct_fallback_reason=setup.fallback_reason, cold_read_method=setup.cold_read,
                  restore_mode=opts.restore, rank_shift=opts.rank_shift, buffer_bytes=opts.buffer_mib * MIB,
                  block_bytes=block, fsync_per_file=True),
        checkpoints=timings, summary=summary, dlio=dlio_compat(written.total_bytes, timings),
        filesystem=FilesystemInfo(name=point.filesystem, path=task.filesystem_path, free_bytes_before=setup.free_before,
                                  free_bytes_after=free_after, total_bytes=total, **mount),
        provenance=Provenance(hostnames=hosts, node_names=sorted(set(nodes)), simulated_nodes=simulated,
                              world_size=size, ranks_per_node=point.ranks_per_node, slurm=provenance.slurm_info(),
                              started_at=started_at, finished_at=_now(), **provenance.versions()),
    )
    atomic_write_text(Path(task.result_path), record.model_dump_json(indent=1))
    result.update(result_path=task.result_path,
                  write_GiBps_mean=summary["write"].aggregate_GiBps_mean if "write" in summary else None,
                  read_GiBps_mean=summary["read"].aggregate_GiBps_mean if "read" in summary else None)
    return result


class _Clock:
    """Timed phases and the error vote that closes each one.

    Stamps are MPI.Wtime() (monotonic, high resolution) shifted by one per-rank anchor to the epoch:
    MPICH's Wtime is not global (MPI_WTIME_IS_GLOBAL = 0), so raw values from two nodes cannot be
    compared, while epoch time from NTP-synchronised nodes can.
    """

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        self.comm = comm
        self.wtime = MPI.Wtime
        self.anchor = time.time() - MPI.Wtime()
        self.pending: tuple[str, str] | None = None  # an off-clock error waiting for the next vote

    def off_clock(self, work: Callable[[], object]) -> None:
        """Work outside the timed region; an OSError is voted on at the next phase."""
        if self.pending is None:
            try:
                work()
            except OSError as exc:
                self.pending = _describe_oserror(exc, exc.filename or "the point directory")

    def phase(self, phase: str, index: int, step: str, host: str, prepare: Callable[[], object],
              work: Callable[[_Phase], None]) -> Any:
        """prepare (off the clock), Barrier, stamp, work, stamp; the allgather closes the phase and votes."""
        self.off_clock(prepare)
        ph = _Phase()
        ph.error, self.pending = self.pending, None
        self.comm.Barrier()
        ph.start = self.wtime()
        if ph.error is None:
            work(ph)
        ph.end = self.wtime()
        stamps = self.comm.allgather((self.comm.Get_rank(), host, ph.start + self.anchor, ph.end + self.anchor,
                                      ph.bytes, ph.files, ph.error))
        _raise_first([s[6] for s in stamps])
        return checkpoint_timing(phase, index, step, [s[:6] for s in stamps])

    def vote(self) -> None:
        """A last vote for off-clock work after the final phase."""
        errors, self.pending = self.comm.allgather(self.pending), None
        _raise_first(errors)


def _raise_first(errors: list[tuple[str, str] | None]) -> None:
    for error in errors:
        if error:
            raise WorkerFailure(FailureClass(error[0]), error[1])


def _write_all(ph: _Phase, paths: list[str], files: list[CheckpointFile], buf: io.Buffer, block: int,
               setup: Setup) -> None:
    for path, f in zip(paths, files, strict=True):
        try:
            if setup.io_mode == "buffered":
                io.write_buffered(path, f.nbytes, buf, block)
            else:
                io.write_direct(path, f.nbytes, buf, block, hybrid=setup.io_mode == "hybrid")
        except OSError as exc:
            ph.error = _describe_oserror(exc, path)
            return
        ph.bytes += f.nbytes
        ph.files += 1


def _read_all(ph: _Phase, paths: list[str], buf: io.Buffer, block: int, direct: bool) -> None:
    for path in paths:
        try:
            ph.bytes += io.read_file(path, buf, block, direct)
        except OSError as exc:
            ph.error = _describe_oserror(exc, path)
            return
        ph.files += 1
