"""Rank 0's last step: the result file, from what every rank measured and reported."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from studyctl import host
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.result.result_fields import EngineInfo, StrategyInfo
from studyctl.definition.result.result_schema import (
    SCHEMA_VERSION,
    CeilingInfo,
    FilesystemInfo,
    IoInfo,
    Phase,
    PhaseSummary,
    Provenance,
    Result,
    SizeInfo,
    WorkerError,
)
from studyctl.errors import NO_SPACE
from studyctl.fsutil import atomic_write_text
from studyctl.units import MIB
from worker import provenance
from worker.state import Run, Setup
from worker.timing import dlio_compat, phase_summary


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Gathered:
    """What rank 0 learned from every rank after the last phase."""

    hosts: list[str]
    nodes: list[str]
    read_bytes: int
    host_memory: int
    host_cores: int
    ranks_on_host: int
    background_threads_on_host: int
    launch_s: float | None


def write_result(run: Run, setup: Setup, timings: list[Any], got: Gathered, started_at: str,
                 strategy: StrategyInfo | None = None, ceilings: CeilingInfo | None = None,
                 engine: EngineInfo | None = None) -> dict[Phase, PhaseSummary]:
    """Rank 0: the result file, written atomically; returns the per-phase summary."""
    task, point, opts, written = run.task, run.point, run.opts, run.written
    target = run.storage.mount()
    phases: tuple[Phase, ...] = ("write", "read")
    summary = {phase: phase_summary([t for t in timings if t.phase == phase])
               for phase in phases if any(t.phase == phase for t in timings)}
    record = Result(
        schema_version=SCHEMA_VERSION, study=task.study, point_id=task.point_id, attempt=task.attempt, point=point,
        sizes=SizeInfo(scale=opts.scale, nominal_checkpoint_bytes=point.nominal_layout().total_bytes,
                       written_checkpoint_bytes=written.total_bytes, files_per_checkpoint=written.files_per_checkpoint,
                       bytes_per_rank_max=written.bytes_per_rank_max, bytes_per_rank_min=written.bytes_per_rank_min,
                       read_bytes_per_restore=got.read_bytes),
        io=IoInfo(io_mode_requested=point.io_mode, io_mode_used=setup.io_mode,
                  direct_fallback_reason=setup.fallback_reason, cold_read_method=setup.cold_read,
                  restore_mode=opts.restore, rank_shift=opts.rank_shift, buffer_bytes=opts.buffer_mib * MIB,
                  block_bytes=opts.block_mib * MIB, fsync_per_file=opts.fsync, naming=opts.naming,
                  subset_world_size=opts.subset_world_size,
                  server_cache=target.server_cache),
        checkpoints=timings, summary=summary, dlio=dlio_compat(written.total_bytes, timings),
        filesystem=FilesystemInfo(name=point.filesystem, path=task.filesystem_path, free_bytes_before=setup.free_before,
                                  free_bytes_after=target.free_after, total_bytes=target.total,
                                  **target.mount),
        provenance=Provenance(hostnames=got.hosts, node_names=sorted(set(got.nodes)), simulated_nodes=run.simulated,
                              world_size=run.comm.Get_size(), ranks_per_node=point.ranks_per_node,
                              slurm=provenance.slurm_info(), started_at=started_at, finished_at=now(),
                              host_memory_bytes=got.host_memory or None, host_cores=got.host_cores,
                              ranks_on_host=got.ranks_on_host, launch_s=got.launch_s,
                              background_threads_on_host=got.background_threads_on_host,
                              memory_return=host.memory_return(), **provenance.versions()),
        strategy=strategy, ceilings=ceilings, engine=engine,
    )
    atomic_write_text(Path(task.result_path), record.model_dump_json(indent=1))
    return summary


class RecordRefused(Exception):
    """The results filesystem is full (or over quota): not even the error record could be written. The worker
    exits RECORD_REFUSED_EXIT, the one way left to say so."""


# A recorded reason's most characters: its start (what failed) and its end (the cause) are kept, the middle
# (e.g. a long object key, named twice) is cut.
MAX_REASON_CHARS = 1000
CUT = " … "


def one_line(reason: str, limit: int = MAX_REASON_CHARS) -> str:
    """`reason` on one line of at most `limit` characters, its middle cut where it is longer: the cause, which
    comes last, is never lost."""
    text = " ".join(reason.split())
    if len(text) <= limit:
        return text
    head = (limit - len(CUT)) // 3
    return f"{text[:head]}{CUT}{text[len(text) - (limit - len(CUT) - head):]}"


def write_error(task: WorkerTask, failure_class: str, reason: str) -> None:
    """A known failure's record (one line of reason), written atomically where the backend looks for it;
    RecordRefused when the results disk has no room for it."""
    record = WorkerError(schema_version=SCHEMA_VERSION, point_id=task.point_id, attempt=task.attempt,
                         failure_class=failure_class, reason=one_line(reason))
    try:
        atomic_write_text(Path(task.error_path), record.model_dump_json(indent=1))
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise RecordRefused(f"{task.error_path}: {exc.strerror}") from exc
        raise


def crash_reason(task: WorkerTask, rank: int, exc: Exception) -> str:
    """An unexpected exception in one line; the results disk's own refusal named as such."""
    if isinstance(exc, OSError) and exc.errno in NO_SPACE and exc.filename is not None \
            and Path(exc.filename).parent == Path(task.result_path).parent:
        return f"rank {rank}: the results disk is full: cannot write {exc.filename} ({exc.strerror})"
    return f"rank {rank}: {type(exc).__name__}: {exc}"
