"""`python -m worker.restart TASK.json`: the restart world of a recovery point, a new launch after
the writing world (`worker.relaunch`).

Phases, each the whole job's: launch (from STUDYCTL_LAUNCH_T0, stamped by the launcher, until every rank has
passed MPI init), restore (the checkpoint the point's restores read: in the same shape as the point's own restore
mode reads it — a tier's copy where the node kept it — or, on another world size or layout, each new rank reading
exactly its byte ranges of the old files, `worker.reshard_read`) and ready (a barrier and one simulated training
step); setup is the rest of the wall time from the launcher's stamp to the last rank's end of that step, less the
cold-read preparation (page eviction, which a real restart does not do: `prepare_s`, reported apart), so the time
to first step is launch to first completed step. Rank 0 adds them to the writing world's result as `recovery` and
writes the point's result; then the checkpoint files (and tier copies) go unless kept.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Literal

from studyctl.definition.checkpoint.layout import Parallelism
from studyctl.definition.checkpoint.points import WorkerTask, restore_files
from studyctl.definition.checkpoint.recovery import (
    LAUNCH_T0_ENV,
    Recovery,
    before_restart_path,
    restart_layout,
    restart_step_dir,
    restart_world,
)
from studyctl.definition.result.result_fields import RecoveryTiming
from studyctl.definition.result.result_schema import CheckpointTiming, IoInfo, Result
from studyctl.fsutil import atomic_write_text
from studyctl.removal import remove_place
from studyctl.states import FailureClass
from studyctl.units import MIB
from worker import io, residency
from worker.clock import Clock, Phase, WorkerFailure, describe_oserror
from worker.compute import Trainer, Window
from worker.nodes import NodeMap, node_map, tier_place, tier_point_dir
from worker.record import write_error
from worker.relaunch import LAUNCH_HOST_ENV
from worker.restore import Restorer, read_timing
from worker.storage import Setup, open_storage

Launcher = Literal["mpiexec", "srun"]


def run_restart(task_path: str) -> None:
    """Every rank of the restart world; a known failure is recorded and raised on every rank, an unexpected one
    recorded and the job aborted (as `worker.run` does)."""
    from mpi4py import MPI

    ready = time.time()  # MPI is initialised (at mpi4py's import)
    comm = MPI.COMM_WORLD
    task = WorkerTask.model_validate_json(Path(task_path).read_text())
    stamps = comm.allgather((ready, os.uname().nodename))
    try:
        _restart(task, comm, stamps)
    except WorkerFailure as failure:
        if comm.Get_rank() == 0:
            write_error(task, failure.failure_class.value, failure.reason)
        raise
    except Exception as exc:
        traceback.print_exc()
        write_error(task, FailureClass.WORKER_CRASH.value, f"restart rank {comm.Get_rank()}: {type(exc).__name__}: "
                                                            f"{exc}")
        if comm.Get_size() > 1:
            sys.stderr.flush()
            comm.Abort(1)
        raise


def _launch_s(stamps: list[tuple[float, str]]) -> tuple[float, bool]:
    """(launch seconds, one clock?): the last rank past MPI init − the launcher's stamp."""
    t0 = os.environ.get(LAUNCH_T0_ENV)
    if t0 is None:
        raise WorkerFailure(FailureClass.CONFIG, f"{LAUNCH_T0_ENV} is not set: start the restart world with "
                                                 "python -m worker.relaunch")
    hosts = {h for _, h in stamps} | {os.environ.get(LAUNCH_HOST_ENV, "")}
    return max(0.0, max(r for r, _ in stamps) - float(t0)), len(hosts) == 1


def _restart(task: WorkerTask, comm: Any, stamps: list[tuple[float, str]]) -> None:
    point = task.point
    recovery = point.recovery
    if recovery is None:
        raise WorkerFailure(FailureClass.CONFIG, f"point {task.point_id} has no recovery: nothing to restart")
    launch_s, shared_clock = _launch_s(stamps)
    if comm.Get_size() != restart_world(point.world_size, recovery):
        raise WorkerFailure(FailureClass.WORLD_SIZE_MISMATCH, (
            f"restart world has {comm.Get_size()} rank(s) but recovery {recovery.label()} of point "
            f"{task.point_id} needs {restart_world(point.world_size, recovery)}"))
    written = _written(task, comm)
    old = point.parallelism
    try:
        new = restart_layout(point.model, old, recovery)
    except ValueError as exc:  # plan refuses these; a hand-made task may not have been planned
        raise WorkerFailure(FailureClass.CONFIG, f"recovery {recovery.label()}: {exc}") from None
    clock = Clock(comm)
    nodes = node_map(comm, point.ranks_per_node)
    buf = io.Buffer.allocate(point.checkpoint.buffer_mib * MIB)
    prepared: list[float] = []
    try:
        timing, extra = _restore(task, comm, clock, nodes, buf, written, new, prepared)
    finally:
        buf.close()
    prepare_s = comm.allreduce(math.fsum(prepared), op=_max_op())  # the barrier after it waits for the slowest
    ready_s, first_step_end = _ready(comm, clock, recovery)
    if comm.Get_rank() == 0:
        step = restart_step_dir(point.checkpoint.writes, point.checkpoint.reads, point.checkpoint.naming)
        wall_s = first_step_end - float(os.environ[LAUNCH_T0_ENV])
        result = _timing(recovery, old, new, step, (launch_s, wall_s, prepare_s), shared_clock, timing, extra,
                         ready_s, "srun" if "SLURM_STEP_ID" in os.environ else "mpiexec")
        _write_result(task, written, result)
    _remove(task, comm, nodes)


def _written(task: WorkerTask, comm: Any) -> Result:
    """The writing world's result (rank 0 reads it; every rank learns it, with what ran: I/O mode, cold read)."""
    got: tuple[Result | None, str | None] = (None, None)
    if comm.Get_rank() == 0:
        path = before_restart_path(task.result_path)
        try:
            got = (Result.model_validate_json(Path(path).read_text()), None)
        except (OSError, ValueError) as exc:
            got = (None, f"the writing world's result {path} cannot be read: {exc}")
    result, problem = comm.bcast(got, root=0)
    if result is None:
        raise WorkerFailure(FailureClass.WORKER_CRASH, str(problem))
    return result


def _max_op() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def _timed(prepare: Callable[[], object], wtime: Callable[[], float], seconds: list[float]) -> Callable[[], None]:
    """`prepare`, its seconds appended to `seconds` (off the clock, but reported)."""
    def run() -> None:
        start = wtime()
        try:
            prepare()
        finally:
            seconds.append(wtime() - start)
    return run


def _restore(task: WorkerTask, comm: Any, clock: Clock, nodes: NodeMap, buf: io.Buffer, written: Result,
             new: Parallelism, prepared: list[float]) -> tuple[CheckpointTiming, Any]:
    """The timed restore, with its prepare (eviction for cold reads, off the clock; its seconds in `prepared`)."""
    point = task.point
    opts = point.checkpoint
    step = restart_step_dir(opts.writes, opts.reads, opts.naming)
    cold = written.io.cold_read_method
    block = opts.block_mib * MIB
    host = os.uname().nodename
    if new == point.parallelism:
        restorer = _same_shape(task, comm, nodes, buf, written.io, clock.wtime)
        timing = clock.phase("read", 0, step, host, _timed(partial(restorer.prepare, step), clock.wtime, prepared),
                             partial(restorer.work, step=step), collective=True,
                             sample=partial(restorer.resident, step))
        return timing, read_timing(0, clock.extras)
    from worker.reshard_read import read_resharded

    step_dir = task.data_dir / step

    def work(ph: Phase) -> None:
        ph.split = split = io.Split()
        try:
            got = read_resharded(comm, point, point.parallelism, new, step_dir, buf, block, cold == "direct", split)
        except OSError as exc:
            ph.error = describe_oserror(exc, exc.filename or str(step_dir))
            return
        ph.bytes, ph.files = got.bytes_read + got.received_bytes, got.files_opened
        ph.extra = (0, got.bytes_read, got.read_s, got.broadcast_s, got.received_bytes)

    paths = _resharded_paths(task, new, comm.Get_rank())
    timing = clock.phase("read", 0, step, host, _timed(partial(_evict, paths, cold), clock.wtime, prepared), work,
                         collective=True, sample=partial(residency.resident, paths))
    return timing, read_timing(0, clock.extras)


def _same_shape(task: WorkerTask, comm: Any, nodes: NodeMap, buf: io.Buffer, ran: IoInfo,
                wtime: Callable[[], float]) -> Restorer:
    """A restore in the written shape: the point's restore mode, a tier's copy where this node kept one; shared
    storage read as the writing world ran (`ran`: its I/O mode and cold-read method)."""
    point = task.point
    rank = comm.Get_rank()
    tier_dir = tier_point_dir(task, nodes.name) if task.tier_path else None
    tier_direct = tier_dir is not None and tier_dir.exists() and io.direct_supported(str(tier_dir))
    reads = restore_files(point.model, point.parallelism, rank, point.checkpoint)
    storage = open_storage(task, rank)
    storage.use(Setup(None, ran.io_mode_used, None, ran.cold_read_method, 0, 0))
    return Restorer(point, comm, reads, buf, ran.cold_read_method, storage, tier_dir, tier_direct, describe_oserror,
                    wtime)


def _resharded_paths(task: WorkerTask, new: Parallelism, rank: int) -> list[str]:
    """The old files this rank reads ranges of."""
    from studyctl.definition.checkpoint.reshard import reshard_reads

    point = task.point
    opts = point.checkpoint
    step_dir = task.data_dir / restart_step_dir(opts.writes, opts.reads, opts.naming)
    names = {r.name for r in reshard_reads(point.model, point.parallelism, new, rank, opts.scale, opts.naming)}
    return [str(step_dir / name) for name in sorted(names)]


def _evict(paths: list[str], cold: str) -> None:
    """Off the clock: the files leave the page cache (fadvise cold reads)."""
    if cold == "fadvise":
        for path in paths:
            io.evict(path)


def _ready(comm: Any, clock: Clock, recovery: Recovery) -> tuple[float, float]:
    """A barrier and the first simulated training step (compute, gradient all-reduce): (the job's time, the last
    rank's end of the step on the epoch clock)."""
    step = recovery.step
    trainer = Trainer(comm, step.compute_s, step.compute, step.allreduce_mib, step.dispatch_share)
    start = clock.wtime()
    comm.Barrier()
    trainer.step(Window([]))
    end = clock.wtime()
    spans = comm.allgather((start + clock.anchor, end + clock.anchor))
    last = max(e for _, e in spans)
    return last - min(s for s, _ in spans), last


def _timing(recovery: Recovery, old: Parallelism, new: Parallelism, step: str, wall: tuple[float, float, float],
            shared_clock: bool, timing: CheckpointTiming, extra: Any, ready_s: float, launcher: Launcher
            ) -> RecoveryTiming:
    """`wall`: (launch, launcher's stamp to the last rank's end of the first step, cold-read preparation) seconds;
    setup is what of the wall no phase counts, less the preparation (never below 0: clocks of other nodes)."""
    ranks = sorted(timing.ranks, key=lambda r: r.rank)
    restore_s = timing.span_s
    launch_s, wall_s, prepare_s = wall
    setup_s = max(0.0, wall_s - prepare_s - launch_s - restore_s - ready_s)
    return RecoveryTiming(
        scenario=recovery.label(), launcher=launcher, shared_clock=shared_clock, step_dir=step,
        old_world_size=old.ranks, old_tensor_parallel=old.tensor, old_pipeline_parallel=old.pipeline,
        old_data_parallel=old.data, new_world_size=new.ranks, new_tensor_parallel=new.tensor,
        new_pipeline_parallel=new.pipeline, new_data_parallel=new.data, lost_nodes=recovery.lost_nodes,
        launch_s=launch_s, restore_s=restore_s, read_s=extra.read_s, broadcast_s=extra.broadcast_s, ready_s=ready_s,
        setup_s=setup_s, prepare_s=prepare_s, step_s=recovery.step.compute_s,
        time_to_first_step_s=launch_s + setup_s + restore_s + ready_s,
        bytes_read=extra.tier_bytes + extra.shared_bytes, bytes_restored_per_rank=[r.bytes for r in ranks],
        files_opened=timing.files, files_opened_per_rank=[r.files for r in ranks], tier_bytes=extra.tier_bytes,
        broadcast_bytes=extra.broadcast_bytes)


def _write_result(task: WorkerTask, written: Result, recovery: RecoveryTiming) -> None:
    """The point's result: the writing world's, with the restart's timing."""
    record = written.model_copy(update={"recovery": recovery})
    atomic_write_text(Path(task.result_path), record.model_dump_json(indent=1))
    Path(before_restart_path(task.result_path)).unlink(missing_ok=True)


def _remove(task: WorkerTask, comm: Any, nodes: NodeMap) -> None:
    """Every rank waits for the result; then the checkpoint files and this world's tier copies go unless kept."""
    comm.Barrier()
    if not task.point.checkpoint.keep:
        if comm.Get_rank() == 0:
            shutil.rmtree(task.data_dir, ignore_errors=True)
        if task.tier_path is not None and nodes.leader:
            remove_place(tier_place(task, nodes.name))
    comm.Barrier()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m worker.restart TASK.json (started by python -m worker.relaunch)", file=sys.stderr)
        return 2
    from mpi4py import MPI

    try:
        run_restart(argv[0])
    except WorkerFailure as failure:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"studyctl restart: {failure.failure_class.value}: {failure.reason}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
