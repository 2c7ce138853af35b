"""A ceiling point: what its resource shape's storage, network and host memory reach.

Storage is the fio pattern, measured as the point's own phases are (worker.clock: barrier, per-rank stamps, the
vote) with the point's I/O mode, block and cold-read method (worker.io): every rank writes and fsyncs one file of
the largest shard any rank of the shape writes, then reads it back cold; then the same with the checkpoint spread
evenly over the ranks. Each phase streams at most definition.planning.ceilings.PROBE_MAX_BYTES per rank and starts no
block after PROBE_STREAM_S (fio's time_based); rounds follow the probe rule (definition.planning.ceilings.another_round:
until every rate's CI is narrow, within a budget and the cost of the cell it judges), after a ramp round that is not
recorded (fio's ramp_time), every other round recorded, the median reported. Then the network
and the memory copy (worker.ceiling_probes), of the largest shard up to definition.planning.ceilings.MEMCPY_MAX_BYTES
per
rank, by the same rule. The result is a normal Result whose checkpoints are the largest-shard probe's writes and
reads, with `ceilings` filled. Memory: the rank's one buffer, as the point's own phases use, and the memory
copy's bounded pieces (plan counts both).
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from studyctl.definition.planning.ceilings import (
    PROBE_STREAM_S,
    PROBES,
    RAMP_ROUNDS,
    STORAGE_BUDGET_S,
    max_probe_bytes,
    probe_bytes,
    probes_run,
    round_limit,
    stream_bytes,
)
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.result.result_schema import CeilingInfo, CheckpointTiming
from studyctl.states import FailureClass
from studyctl.units import MIB, format_bytes
from worker import ceiling_probes, ceiling_shared, io
from worker.clock import Clock, Phase, WorkerFailure, describe_oserror
from worker.record import Gathered, write_result
from worker.state import Run, Setup

Timings = dict[str, list[CheckpointTiming]]  # "largest-write", "even-read", ...: one per round
# each storage probe's phase → the CeilingInfo field its rates fill
FIELDS = {"largest-write": "storage_write_GiBps", "largest-read": "storage_read_GiBps",
          "even-write": "even_write_GiBps", "even-read": "even_read_GiBps"}


def run_ceiling(run: Run, setup: Setup, gather: Callable[[], Gathered], started_at: str) -> dict[str, Any]:
    """Every rank: reuse a shared ceiling or measure one, then rank 0 records it; the probe files are removed
    (on a failure every rank voted on too; an unexpected error aborts the job and worker.run removes them)."""
    try:
        info, checkpoints = _reuse_or_measure(run, setup)
    except WorkerFailure:
        _remove_files(run)
        raise
    got = gather()
    if run.rank == 0:
        write_result(run, setup, checkpoints, got, started_at, ceilings=info)
        if run.task.shared_ceilings_root and info.reused_from is None:
            ceiling_shared.record(run.task, got.nodes)
    _remove_files(run)
    result: dict[str, Any] = {"point_id": run.task.point_id, "attempt": run.task.attempt, "rank": run.rank}
    if run.rank == 0:
        result["result_path"] = run.task.result_path
    return result


def _reuse_or_measure(run: Run, setup: Setup) -> tuple[CeilingInfo, list[CheckpointTiming]]:
    largest, even = probe_bytes(run.point)
    _check_space(run, setup, max_probe_bytes(run.point))
    reused = None
    if run.task.shared_ceilings_root:
        nodes = run.comm.allgather(run.node)
        reused = run.comm.bcast(ceiling_shared.find(run.task, nodes) if run.rank == 0 else None, root=0)
    if reused is not None:
        return reused.ceilings, reused.checkpoints
    timings, info = _measure(run, setup, largest, even)
    return info, timings["largest-write"] + timings["largest-read"]


def _check_space(run: Run, setup: Setup, needed: int) -> None:
    """The probe's files at once, with the point's free-space margin (the point's own check counted its own)."""
    required = int(needed * (1 + run.opts.free_space_margin))
    problem = None
    if run.rank == 0 and setup.total and setup.free_before < required:
        problem = (f"not enough free space on {run.task.filesystem_path} for the ceiling probe: need "
                   f"{format_bytes(required)}, have {format_bytes(setup.free_before)} free")
    problem = run.comm.bcast(problem, root=0)
    if problem:
        raise WorkerFailure(FailureClass.INSUFFICIENT_SPACE, problem)


def _measure(run: Run, setup: Setup, largest: int, even: int) -> tuple[Timings, CeilingInfo]:
    buf = io.Buffer.allocate(run.opts.buffer_mib * MIB)
    clock = Clock(run.comm)
    timings: Timings = {}

    def storage_round(r: int) -> dict[str, float]:
        """Round `r` of every storage probe, the ramp's first (r < RAMP_ROUNDS: run, not recorded)."""
        rates = {}
        for probe, nbytes in probes_run(run.point).items():
            phases = _storage(run, setup, clock, buf, r, max(0, r - RAMP_ROUNDS), probe, nbytes)
            for phase, timing in zip(("write", "read"), phases, strict=True):
                if r >= RAMP_ROUNDS:
                    timings.setdefault(f"{probe}-{phase}", []).append(timing)
                    rates[FIELDS[f"{probe}-{phase}"]] = timing.aggregate_GiBps
        return rates

    most = round_limit(run.point)  # every probe's: a ceiling costs no more than the cell it judges
    try:
        rounds = ceiling_probes.repeat(run.comm, STORAGE_BUDGET_S, storage_round, most, RAMP_ROUNDS)
        clock.vote()
        rounds |= ceiling_probes.network(run.comm, buf, stream_bytes(run.point), run.node, most)
        rounds |= ceiling_probes.memcpy(run.comm, stream_bytes(run.point), most)
    finally:
        buf.close()
    for phase in ("write", "read"):  # an even share the largest probe streams as well was not measured twice
        rounds.setdefault(FIELDS[f"even-{phase}"], rounds[FIELDS[f"largest-{phase}"]])
    rate: dict[str, Any] = {name: statistics.median(values) for name, values in rounds.items()}
    info = CeilingInfo(shape=shape_of(run.point).key, largest_shard_bytes=largest, even_bytes=even,
                       repeats=len(timings["largest-write"]), rounds=rounds, **rate)
    return timings, info


def _storage(run: Run, setup: Setup, clock: Clock, buf: io.Buffer, r: int, index: int, probe: str, nbytes: int
             ) -> tuple[CheckpointTiming, CheckpointTiming]:
    """One file per rank written and fsynced, then read back cold; removed off the clock. `r` counts every round
    run (each writes other bytes), `index` the recorded ones."""
    path = str(run.point_dir / f"ceiling-{probe}-{run.rank}")
    step = f"ceiling-{probe}"
    block = run.opts.block_mib * MIB
    tag = (r * len(PROBES) + PROBES.index(probe)) * 1_000_003 + run.rank  # every file's bytes differ
    write = clock.phase("write", index, step, run.host, partial(buf.stamp, tag),
                        partial(_write, path=path, nbytes=nbytes, buf=buf, block=block, io_mode=setup.io_mode))
    evict: Callable[[], object] = partial(io.evict, path) if setup.cold_read == "fadvise" else _nothing
    read = clock.phase("read", index, step, run.host, evict,
                       partial(_read, path=path, buf=buf, block=block, direct=setup.cold_read == "direct"))
    clock.off_clock(partial(Path(path).unlink, missing_ok=True))
    return write, read


def _stop_ns() -> int:
    """When a probe's phase that starts now stops starting blocks (a time-bounded stream)."""
    return perf_counter_ns() + int(PROBE_STREAM_S * 1e9)


def _write(ph: Phase, path: str, nbytes: int, buf: io.Buffer, block: int, io_mode: str) -> None:
    stop = _stop_ns()
    try:
        if io_mode == "buffered":
            written = io.write_buffered(path, nbytes, buf, block, fsync=True, stop_ns=stop)
        else:
            written = io.write_direct(path, nbytes, buf, block, hybrid=io_mode == "hybrid", fsync=True, stop_ns=stop)
    except OSError as exc:
        ph.error = describe_oserror(exc, path)
        return
    ph.bytes, ph.files = written, 1


def _read(ph: Phase, path: str, buf: io.Buffer, block: int, direct: bool) -> None:
    try:
        ph.bytes = io.read_file(path, buf, block, direct, stop_ns=_stop_ns())
    except OSError as exc:
        ph.error = describe_oserror(exc, path)
        return
    ph.files = 1


def _nothing() -> None:
    pass


def _remove_files(run: Run) -> None:
    """Every rank done, rank 0 removes the probe's directory (its files are no checkpoint: never kept)."""
    run.comm.Barrier()
    if run.rank == 0:
        shutil.rmtree(run.point_dir, ignore_errors=True)
    run.comm.Barrier()
