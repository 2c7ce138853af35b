"""The checkpoint worker: every MPI rank writes its files of `writes` checkpoints, then restores.

Per checkpoint: Barrier → per-rank start → write every file (fsync each) → per-rank end → an
allgather that is both the closing barrier and the error vote, so no rank waits forever on a
rank that failed. Work off the clock (step directories, page eviction, deleting steps no restore
reads) reports its errors into the next vote, so a failure on one rank is every rank's failure.
Memory is one buffer per rank whatever the checkpoint size.
"""

from __future__ import annotations

import contextlib
import errno
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from studyctl import host
from studyctl.definition.checkpoint.layout import step_dir_name
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.result.result_fields import EngineInfo, StrategyInfo
from studyctl.definition.result.result_schema import (
    RECORD_REFUSED_EXIT,
    PhaseSummary,
)
from studyctl.definition.result.result_schema import Phase as PhaseName
from studyctl.removal import remove_place
from studyctl.states import FailureClass
from studyctl.units import MIB
from worker import handoff, io, provenance
from worker.ceiling import run_ceiling
from worker.checkpointing import Checkpointing
from worker.claim import CLAIMS, release
from worker.clock import Clock, Phase, Sampler, WorkerFailure, describe_oserror
from worker.engine_point import open_engine
from worker.nodes import dir_name, tier_place
from worker.record import Gathered, RecordRefused, crash_reason, now, write_error, write_result
from worker.state import Run, Setup
from worker.stop import tier_removed_on_sigterm
from worker.storage import Storage, read_files, remove_after_crash, write_files


def run_task(task_path: str) -> dict[str, Any]:
    """Entry point for every rank (mpiexec or one srun task each); raises WorkerFailure on known failures.

    An unexpected exception on one rank would leave the others blocked in a collective forever, so with
    more than one rank it records a worker_crash error, removes the point's files and aborts the job.
    """
    from mpi4py import MPI

    ready = time.time()  # MPI is initialised (at mpi4py's import)
    task = WorkerTask.model_validate_json(Path(task_path).read_text())
    comm = MPI.COMM_WORLD
    launch_s = _launch_s(comm, ready)
    try:
        with tier_removed_on_sigterm():
            return _run_reporting(task, comm, launch_s)
    finally:
        release(task)


def _launch_s(comm: Any, ready: float) -> float | None:
    """From the earliest rank process start to the last rank ready after MPI init (None where unknown)."""
    launch = comm.allgather((provenance.process_start_epoch(), ready))
    starts = [s for s, _ in launch if s is not None]
    return max(r for _, r in launch) - min(starts) if len(starts) == len(launch) else None


def _run_reporting(task: WorkerTask, comm: Any, launch_s: float | None) -> dict[str, Any]:
    """`_run`, with known failures recorded and unexpected ones turned into a crash record and an abort.
    RecordRefused where the results disk had no room for the record (the abort's exit code says so)."""
    try:
        return _run(task, comm, launch_s)
    except WorkerFailure as failure:
        if comm.Get_rank() == 0:
            write_error(task, failure.failure_class.value, failure.reason)
        raise
    except Exception as exc:
        with contextlib.suppress(OSError):  # stderr may be a file on the results disk, and that disk full
            traceback.print_exc()
        refused: RecordRefused | None = None
        try:
            try:
                write_error(task, FailureClass.WORKER_CRASH.value, crash_reason(task, comm.Get_rank(), exc))
            except RecordRefused as full:
                refused = full  # the data goes all the same; the exit code says why there is no record
            if CLAIMS or (comm.Get_rank() != 0 and task.point.world_size == comm.Get_size()):  # ours, claimed
                _remove_after_crash(task, comm.Get_rank())
        finally:
            if comm.Get_size() > 1:
                release(task)  # Abort ends this process before run_task's own release
                with contextlib.suppress(OSError):
                    sys.stderr.flush()
                comm.Abort(RECORD_REFUSED_EXIT if refused else 1)
        if refused:
            raise refused from exc
        raise


def _remove_after_crash(task: WorkerTask, rank: int) -> None:
    """Any rank: the point's data and this rank's node's tier folder (the abort ends the other ranks, rank 0 too,
    so its claim goes with it; a tier on another node is its ranks' to remove, or studyctl's afterwards)."""
    remove_after_crash(task)
    if task.tier_path is not None:
        node, _ = provenance.node_name(rank, task.point.ranks_per_node)
        remove_place(tier_place(task, node), node_dir=dir_name(node))


def _run(task: WorkerTask, comm: Any, launch_s: float | None) -> dict[str, Any]:
    """Check, set up, measure, clean up, record: each a named step every rank takes together."""
    _check_point(task, comm.Get_size())
    started_at = now()
    run = Run(task, comm)
    run.engine = open_engine(task, comm, run.storage)  # a device or target it cannot have: refused, nothing written
    setup = _set_up(run)
    if task.point.role == "ceiling":  # probes of its resource shape instead of checkpoints (ceiling points)
        return run_ceiling(run, setup, partial(_gather, run, 0, launch_s), started_at)
    timings, ck = _measure(run, setup)
    idle_steps = run.comm.gather(ck.idle_step_s(), root=0)
    got = _gather(run, ck.background_threads(), launch_s)
    engine = run.engine.info() if run.engine is not None else None
    result: dict[str, Any] = {"point_id": task.point_id, "attempt": task.attempt, "rank": run.rank}
    strategy = ck.info(idle_steps, run.written.bytes_per_rank_max) if run.rank == 0 else None
    summary = _record(run, setup, timings, got, started_at, strategy, engine) if run.rank == 0 else {}
    keep_files, keep_tier = handoff.keeps(task.point)  # a recovery point's restart after a failure reads them
    handoff.lose_tiers(task.point, ck)
    ck.close(keep=keep_tier)
    _remove_files(run, keep_files)
    if run.rank != 0:
        return result
    result.update(result_path=task.result_path,
                  write_GiBps_mean=summary["write"].aggregate_GiBps_mean if "write" in summary else None,
                  read_GiBps_mean=summary["read"].aggregate_GiBps_mean if "read" in summary else None)
    return result


def _check_point(task: WorkerTask, size: int) -> None:
    """The MPI world and the point agree, and the point describes a checkpoint that can exist."""
    point = task.point
    if size != point.world_size:
        raise WorkerFailure(FailureClass.WORLD_SIZE_MISMATCH, (
            f"MPI world has {size} rank(s) but point {task.point_id} needs {point.world_size} "
            f"({point.nodes} nodes × {point.ranks_per_node}); under srun pass the right --mpi (pmi2 for the mpich "
            f"wheel, pmix for Open MPI), under mpiexec pass -n {point.world_size}"))
    problems = point.problems()
    if point.checkpoint.reads and not point.checkpoint.writes:
        problems.append("checkpoint.reads > 0 needs checkpoint.writes > 0 (restores read written checkpoints)")
    if problems:
        raise WorkerFailure(FailureClass.CONFIG, "; ".join(problems))


def _set_up(run: Run) -> Setup:
    """Rank 0 decides (the target ready: directory, free space, O_DIRECT; or the store answering) and every rank
    learns its decision."""
    decision = run.storage.decide(run.written.total_bytes) if run.rank == 0 else None
    setup: Setup = run.comm.bcast(decision, root=0)
    if setup.error:
        raise WorkerFailure(FailureClass(setup.error[0]), setup.error[1])
    run.storage.use(setup)
    return setup


def _measure(run: Run, setup: Setup) -> tuple[list[Any], Checkpointing]:
    """`writes` timed checkpoints, then `reads` timed restores, in the point's strategy and restore mode;
    on failure the point's files (and its tier's) go."""
    buf = io.Buffer.allocate(run.opts.buffer_mib * MIB)
    clock = Clock(run.comm)
    ck, problem = Checkpointing.create(run.task, run.comm, buf, setup.io_mode, setup.cold_read, run.point_dir,
                                       run.my_reads, describe_oserror, clock.wtime, run.storage, run.engine)
    try:
        if problem:
            raise WorkerFailure(FailureClass(problem[0]), problem[1])
        if run.engine is not None:
            run.engine.allocate()  # the real tensors, off the clock
        timings = _write_phases(run, setup, clock, buf, ck)
        timings += _read_phases(run, setup, clock, buf, ck)
        clock.vote()
        return timings, ck
    except WorkerFailure:
        run.comm.Barrier()
        if run.rank == 0:
            _remove_point(run)
        ck.close(keep=False)
        raise
    finally:
        buf.close()


def _write_phases(run: Run, setup: Setup, clock: Clock, buf: io.Buffer, ck: Checkpointing) -> list[Any]:
    opts, ep = run.opts, run.engine
    kept = min(opts.writes, opts.reads)
    timings = []
    for i in range(opts.writes):
        step = step_dir_name(i, opts.naming)
        # every checkpoint's bytes differ; every buffer page touched before the clock (an engine stamps its state)
        prepare = partial(_prepare_step, run.storage, buf, i * 1_000_003 + run.rank, ck, step)
        sync: Callable[[Phase], None] = partial(write_files, run.storage, describe_oserror, step=step,
                                                files=run.my_files, buf=buf)
        if ep is not None:
            sync = partial(ep.save, index=i)
        collective = ck.writer is not None or (ep is not None and ep.engine.name == "dcp")
        timings.append(clock.phase("write", i, step, run.host, prepare, ck.write_work(i, step) or sync,
                                   collective=collective))
        ck.record_write(i, timings[-1], clock.extras)
        if ep is not None:
            ep.after_write(i)
        if i >= kept and not opts.keep:  # no restore reads this step: free its space now (off the clock)
            names = ep.names(i) if ep is not None else [f.name for f in run.my_files]
            clock.off_clock(partial(run.storage.remove_step, step, names))
            if ep is not None:
                ep.engine.forget(i)
    return timings


def _read_phases(run: Run, setup: Setup, clock: Clock, buf: io.Buffer, ck: Checkpointing) -> list[Any]:
    opts = run.opts
    kept = min(opts.writes, opts.reads)
    names = [f.name for f in run.my_reads]
    timings = []
    if opts.reads:
        ck.before_reads(run.comm)
    for k in range(opts.reads):
        step = step_dir_name(k % kept, opts.naming)
        prepare: Callable[[], object] = partial(run.storage.make_cold, step, names)
        read: Callable[[Phase], None] = partial(read_files, run.storage, describe_oserror, step=step,
                                                files=run.my_reads, buf=buf)
        sample: Sampler = partial(run.storage.resident, step, names)
        restore = ck.read_work(step)
        if restore is not None:  # tiered or broadcast: the restorer knows what to evict and read
            prepare, read, sample = partial(ck.read_prepare, step), restore, partial(ck.read_sample, step)
        if run.engine is not None:  # the engine's load, from the tier where it holds the files
            prepare, read, sample = run.engine.read_phase(k % kept, ck.tier_target())
        collective = restore is not None or run.engine is not None
        timings.append(clock.phase("read", k, step, run.host, prepare, read, collective=collective, sample=sample))
        ck.record_read(k, timings[-1], clock.extras)
        if run.engine is not None:
            run.engine.verify(k, k % kept)
    return timings


def _prepare_step(storage: Storage, buf: io.Buffer, tag: int, ck: Checkpointing, step: str) -> None:
    storage.prepare_step(step)
    buf.stamp(tag)
    ck.write_prepare(step, tag)


def _gather(run: Run, background_threads: int, launch_s: float | None) -> Gathered:
    """Where every rank ran, what shared its host, the smallest host's memory and what was read (rank 0's)."""
    comm = run.comm
    hosts = comm.gather(run.host, root=0)
    nodes = comm.gather(run.node, root=0)
    sharing = comm.gather((run.host, provenance.usable_cores(), background_threads), root=0)
    memory = min(comm.allgather(host.total_memory() or 0))
    read_bytes = comm.allreduce(sum(f.nbytes for f in run.my_reads))
    cores, ranks, threads = provenance.host_sharing(sharing) if sharing else (0, 0, 0)
    return Gathered(hosts, nodes, read_bytes, memory, cores, ranks, threads, launch_s)


def _record(run: Run, setup: Setup, timings: list[Any], got: Gathered, started_at: str,
            strategy: StrategyInfo | None, engine: EngineInfo | None = None) -> dict[PhaseName, PhaseSummary]:
    """Rank 0, first thing once measured: the result file, so what was measured outlives a kill during clean-up.
    A full disk (results beside the checkpoints): the point's files are removed, unless kept, and it is retried."""
    try:
        return write_result(run, setup, timings, got, started_at, strategy, engine=engine)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or run.opts.keep:
            raise
        _remove_point(run)
        return write_result(run, setup, timings, got, started_at, strategy, engine=engine)


def _remove_files(run: Run, keep: bool) -> None:
    """Every rank waits for the result, then rank 0 removes the point's files unless kept."""
    comm = run.comm
    comm.Barrier()
    if run.rank == 0 and not keep:
        _remove_point(run)
    comm.Barrier()


def _remove_point(run: Run) -> None:
    """Rank 0: the point's files, or its objects (a store that cannot be asked: left to the next command)."""
    run.storage.remove_point()
