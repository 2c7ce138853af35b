"""What a study will cost before it runs: per-point sizes, memory, disk, node-hours."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from studyctl.definition.checkpoint.engines import (
    engine_files_label,
    engine_files_per_checkpoint,
    engine_label,
    engine_refusal,
    engine_tensor_bytes,
)
from studyctl.definition.checkpoint.layout import (
    Parallelism,
    disk_steps_needed,
    num_parameters,
    rank_files,
    summarize,
    write_classes,
)
from studyctl.definition.checkpoint.objects import OBJECT_COLD_READ, ObjectRequests, read_requests, write_requests
from studyctl.definition.checkpoint.points import (
    CheckpointOptions,
    Point,
    cold_read_method,
    restore_bytes,
)
from studyctl.definition.checkpoint.restore_reads import storage_read_bytes, storage_read_files
from studyctl.definition.inputs.catalog import ModelSpec
from studyctl.definition.planning.ceilings import ceiling_sized
from studyctl.definition.planning.expand import PlannedPoint
from studyctl.definition.planning.needs import training_needs
from studyctl.definition.planning.plan_row import ObjectColumns, PlanRow, SizedColumns, with_columns
from studyctl.definition.planning.recovery_plan import allocation_node_hours, recovery_label, restart_columns_of
from studyctl.definition.planning.run_time import moved_bytes, restarts
from studyctl.definition.planning.strategies import host_snapshot_bytes, memory_per_host_bytes
from studyctl.definition.planning.sweep import Estimate, SweepFile
from studyctl.errors import UserError
from studyctl.units import GIB, format_bytes

# DLIO's resident memory per process before any tensor (Python, PyTorch, mpi4py), measured: about 0.36 GiB.
DLIO_BASE_BYTES = int(0.36 * GIB)
PLAN_AXES = ("model", "zero_stage", "nodes", "ranks_per_node", "tensor_parallel", "pipeline_parallel", "filesystem",
             "io_mode", "strategy", "engine", "state", "replicated_writer", "restore", "recovery", "repetition")


def plan_row(pp: PlannedPoint, sweep: SweepFile) -> PlanRow:
    """One point's row (`PlanRow.json()` is what `plan --json` writes)."""
    p = pp.point
    opts = p.checkpoint
    par = p.parallelism
    objects = sweep.filesystems[p.filesystem].object_store is not None
    settings = _settings(opts, p.io_mode)
    infeasible = pp.exclusion is not None and pp.exclusion.infeasible
    sized = None if infeasible else _sized(p.model, par, p.nodes, p.ranks_per_node, opts, sweep.estimate, restarts(p))
    own: dict[str, Any] = dict(
        point_id=p.point_id, model=p.model.name, zero_stage=p.zero_stage, tensor_parallel=p.tensor_parallel,
        pipeline_parallel=p.pipeline_parallel, data_parallel=par.data, nodes=p.nodes,
        ranks_per_node=p.ranks_per_node, world_size=p.world_size, filesystem=p.filesystem, io_mode=p.io_mode,
        repetition=p.repetition, role=p.role, excluded=pp.excluded,
        exclude_kind=pp.exclusion.kind.value if pp.exclusion else None, exclude_reason=pp.exclude_reason,
        parameters=num_parameters(p.model),
        **{**settings, "cold_read": OBJECT_COLD_READ if objects else settings["cold_read"]},
        recovery=recovery_label(p))
    if sized is None:
        return PlanRow(**own)
    if p.recovery is not None:  # a restart after a failure: node-hours of its allocation
        sized = replace(sized, node_hours=allocation_node_hours(p, sized.estimated_seconds))
    if p.role == "ceiling":  # its probes' bytes and cost, not its source point's checkpoints
        sized = with_columns(own, sized, ceiling_sized(p, sweep.estimate))
    return PlanRow(**own, objects=object_requests(p.model, par, opts) if objects else None, sized=sized,
                   restart=restart_columns_of(p),
                   needs=training_needs(sized.nominal_checkpoint_bytes, sized.nominal_storage_read_bytes, p.nodes,
                                        opts.strategy, sweep.training))


@lru_cache(maxsize=4096)
def _settings(opts: CheckpointOptions, io_mode: str) -> dict[str, Any]:
    """How a point writes and restores, as the plan shows it per row (the same for many points)."""
    return {
        "scale": opts.scale,
        "strategy": opts.strategy,
        "writes": opts.writes,
        "reads": opts.reads,
        "restore": opts.restore,
        "rank_shift": opts.rank_shift,
        "block_mib": opts.block_mib,
        "cold_read": cold_read_method(io_mode, opts.cold_read),
        "fsync": opts.fsync,
        "naming": opts.naming,
        "subset_world_size": opts.subset_world_size,
        "engine": opts.engine,
        "device": opts.device,
        "state": opts.state,
        "replicated_writer": opts.replicated_writer,
        "engine_label": engine_label(opts),
    }


@lru_cache(maxsize=4096)
def object_requests(m: ModelSpec, par: Parallelism, opts: CheckpointOptions) -> ObjectColumns:
    """On an object store: how many objects and requests a checkpoint and a restore of this layout make at its
    part size (definition.checkpoint.objects), in all and on the busiest rank."""
    conv = opts.convention
    writes = [(count, write_requests([f.nbytes for f in rank_files(m, par, rank, opts.scale, conv=conv)],
                                     opts.part_mib))
              for rank, count in write_classes(m, par, opts.scale, conv)]
    reads = [(count, read_requests([f.nbytes for f in files], opts.part_mib))
             for count, files in storage_read_files(m, par, opts)]
    written = sum((r.times(count) for count, r in writes), ObjectRequests())
    return ObjectColumns(part_mib=opts.part_mib, s3_concurrency=opts.s3_concurrency,
                         objects_per_checkpoint=written.objects, put_requests_per_checkpoint=written.put,
                         part_requests_per_checkpoint=written.part,
                         get_requests_per_restore=sum(count * r.get for count, r in reads),
                         write_requests_per_rank_max=max(r.put + r.part for _, r in writes),
                         read_requests_per_rank_max=max((r.get for _, r in reads), default=0))


@lru_cache(maxsize=65536)
def _sized(model: ModelSpec, par: Parallelism, nodes: int, ranks_per_node: int, opts: CheckpointOptions,
           estimate: Estimate, restarts: int = 0) -> SizedColumns:
    """Size and cost fields; the same for every filesystem and repetition of a cell (`restarts`: a recovery
    point's restart restores once more: `run_time`)."""
    lay = summarize(model, par, opts.scale, opts.convention)
    nominal = summarize(model, par, 1.0, opts.convention)
    read, from_storage = restore_bytes(model, par, opts), storage_read_bytes(model, par, opts)
    moved = moved_bytes(lay.total_bytes, from_storage, opts, restarts)
    training = opts.simulated_training_s()
    snapshot = host_snapshot_bytes(model, par, ranks_per_node, opts.scale, opts.convention)
    tensors = engine_tensor_bytes(model, par, ranks_per_node, opts)
    point_tensors = engine_tensor_bytes(model, par, nodes * ranks_per_node, opts)
    seconds = estimate.run_seconds(moved, nodes, training)
    return SizedColumns(
        checkpoint_bytes=lay.total_bytes,
        nominal_checkpoint_bytes=nominal.total_bytes,
        read_bytes_per_restore=read,  # what the ranks hold afterwards (the worker's figure of the same name)
        storage_read_bytes_per_restore=from_storage,
        broadcast_bytes_per_restore=read - from_storage,  # received over MPI (restore broadcast)
        nominal_storage_read_bytes=storage_read_bytes(model, par, opts.model_copy(update={"scale": 1.0})),
        bytes_per_rank_max=lay.bytes_per_rank_max,
        bytes_per_rank_min=lay.bytes_per_rank_min,
        files_per_checkpoint=engine_files_per_checkpoint(opts, par.ranks, lay),
        engine_files=engine_files_label(opts),
        tensor_memory_per_host_bytes=tensors,
        writer_ranks=lay.writer_ranks,
        disk_bytes_needed=lay.total_bytes * disk_steps_needed(opts.writes, opts.reads, opts.keep),
        disk_bytes_required=opts.disk_bytes_required(lay.total_bytes),
        snapshot_memory_per_host_bytes=snapshot if opts.strategy == "async" else 0,
        worker_memory_per_host_bytes=memory_per_host_bytes(opts, ranks_per_node, snapshot, tensors),
        worker_memory_per_point_bytes=memory_per_host_bytes(opts, nodes * ranks_per_node, lay.total_bytes,
                                                            point_tensors),
        dlio_memory_per_host_bytes=dlio_memory_per_host(lay.bytes_per_rank_max, ranks_per_node, opts.reads > 0),
        simulated_training_s=training,
        estimated_seconds=round(seconds, 1),
        node_hours=nodes * seconds / 3600,
    )


def estimated_seconds(point: Point, sweep: SweepFile) -> float:
    """A feasible point's estimated run time, as its plan row gives it (simulated training included)."""
    if point.role == "ceiling":
        return float(ceiling_sized(point, sweep.estimate)["estimated_seconds"])
    return _sized(point.model, point.parallelism, point.nodes, point.ranks_per_node, point.checkpoint,
                  sweep.estimate, restarts(point)).estimated_seconds


def dlio_memory_per_host(state_bytes: int, ranks_per_node: int, restores: bool) -> int:
    """What DLIO holds per host: ~0.36 GiB per process, plus the rank's whole state once while writing and
    twice while reading (measured)."""
    return ranks_per_node * (DLIO_BASE_BYTES + (2 if restores else 1) * state_bytes)


def plan_rows(points: Iterable[PlannedPoint], sweep: SweepFile) -> Iterator[PlanRow]:
    for pp in points:
        yield plan_row(pp, sweep)


@dataclass
class PlanSummary:
    points: int = 0
    runnable: int = 0
    excluded: int = 0
    bytes_to_write: int = 0
    bytes_to_read: int = 0  # served by storage
    bytes_to_broadcast: int = 0  # received over MPI by restore broadcast
    node_hours: float = 0.0
    max_disk_bytes_needed: dict[str, int] = field(default_factory=dict)  # per filesystem
    max_disk_bytes_required: dict[str, int] = field(default_factory=dict)  # the same plus the free-space margin
    max_worker_memory_per_host: int = 0
    max_worker_memory_per_point: int = 0  # all of a point's hosts: what one machine needs when nodes are simulated
    max_dlio_memory_per_host: int = 0
    axis_counts: dict[str, Counter] = field(default_factory=dict)
    exclude_reasons: Counter = field(default_factory=Counter)
    # (model, strategy, nodes, restore) → the first such row: the inverse question's answer and its inputs (`needs`)
    training_needs: dict[tuple[str, str, int, str], PlanRow] = field(default_factory=dict)
    # runnable points a study adds itself (role ceiling or calibration), also counted in the totals above:
    # role → {"points", "bytes" (written and read from storage), "node_hours"}
    auxiliary: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, row: PlanRow) -> None:
        self.points += 1
        counts = self.axis_counts
        for axis in PLAN_AXES:
            if axis not in counts:
                counts[axis] = Counter()
            counts[axis][getattr(row, axis)] += 1
        if row.excluded:
            self.excluded += 1
            self.exclude_reasons[row.exclude_reason] += 1
            return
        self.runnable += 1
        sized = row.sized
        assert sized is not None  # a runnable point's layout is possible
        moved = sized.checkpoint_bytes * row.writes + sized.storage_read_bytes_per_restore * row.reads
        self.bytes_to_write += sized.checkpoint_bytes * row.writes
        self.bytes_to_read += sized.storage_read_bytes_per_restore * row.reads
        self.bytes_to_broadcast += sized.broadcast_bytes_per_restore * row.reads
        self.node_hours += sized.node_hours
        fs = row.filesystem
        self.max_disk_bytes_needed[fs] = max(self.max_disk_bytes_needed.get(fs, 0), sized.disk_bytes_needed)
        self.max_disk_bytes_required[fs] = max(self.max_disk_bytes_required.get(fs, 0), sized.disk_bytes_required)
        self.max_worker_memory_per_point = max(self.max_worker_memory_per_point, sized.worker_memory_per_point_bytes)
        self.max_worker_memory_per_host = max(self.max_worker_memory_per_host, sized.worker_memory_per_host_bytes)
        self.max_dlio_memory_per_host = max(self.max_dlio_memory_per_host, sized.dlio_memory_per_host_bytes)
        if row.role != "measure":
            aux = self.auxiliary.setdefault(row.role, {"points": 0, "bytes": 0, "node_hours": 0.0})
            aux["points"] += 1
            aux["bytes"] += moved
            aux["node_hours"] += sized.node_hours
            return
        self.training_needs.setdefault((row.model, row.strategy, row.nodes, row.restore), row)

    def extras(self) -> dict[str, tuple[float, float]]:
        """The points a study adds itself (ceilings and calibration, all roles together) against the whole plan:
        "points", "bytes" (written and read from storage), "node_hours" → (theirs, their share of the total)."""
        totals = {"points": self.runnable, "bytes": self.bytes_to_write + self.bytes_to_read,
                  "node_hours": self.node_hours}
        return {k: (theirs, theirs / total if total else 0.0) for k, total in totals.items()
                for theirs in [sum(a[k] for a in self.auxiliary.values())]}


def refuse_engines_without_torch(sweep: SweepFile) -> SweepFile:
    """`plan` and `submit` refuse a sweep with engine points where torch is missing: one line, exit 2, before any
    row is planned or any point is recorded."""
    refusal = engine_refusal(sweep)
    if refusal:
        raise UserError(refusal, 2)
    return sweep


def check_budget(summary: PlanSummary, budget_node_hours: float | None) -> None:
    """The one budget gate, for `plan` and `submit` alike: over the estimate is a failure (exit 1), not bad input."""
    if budget_node_hours is not None and summary.node_hours > budget_node_hours:
        raise UserError(f"estimated {summary.node_hours:.2f} node-hours exceeds --budget-node-hours "
                        f"{budget_node_hours:g}; nothing was submitted", 1)


def summarize_plan(rows: Iterable[PlanRow]) -> PlanSummary:
    summary = PlanSummary()
    for row in rows:
        summary.add(row)
    return summary


@dataclass(frozen=True)
class Capacity:
    """What the machines offer, probed outside definition/ (free space and memory are I/O)."""

    free_bytes: dict[str, int | None]  # per filesystem name; None: could not be read
    free_where: dict[str, str]  # the directory whose free space was read, or why none was
    host_memory_bytes: int | None
    host_memory_source: str  # e.g. "this machine (MemAvailable)", "Slurm RealMemory of partition batch"
    hosts_share_one_machine: bool = False  # local backend: simulated nodes share this machine's memory


def capacity_problems(summary: PlanSummary, capacity: Capacity) -> list[str]:
    """Each way the largest point will not fit, one line each (empty when everything fits)."""
    return disk_problems(summary, capacity) + memory_problems(summary, capacity)


def disk_problems(summary: PlanSummary, capacity: Capacity) -> list[str]:
    """Filesystems with less free space than the largest point requires, as the worker judges it (its peak plus
    checkpoint.free_space_margin): what submit refuses up front."""
    out = []
    for fs, need in summary.max_disk_bytes_required.items():
        free = capacity.free_bytes.get(fs)
        if free is not None and need > free:
            out.append(f"disk: filesystem {fs} needs {format_bytes(need)} free for its largest point (its peak + "
                       f"checkpoint.free_space_margin); {format_bytes(free)} free at "
                       f"{capacity.free_where.get(fs, '?')}")
    return out


def memory_problems(summary: PlanSummary, capacity: Capacity) -> list[str]:
    """The largest point's workers against the memory of the hosts that run them."""
    memory = capacity.host_memory_bytes
    if memory is None or not summary.runnable:
        return []
    need = summary.max_worker_memory_per_point if capacity.hosts_share_one_machine \
        else summary.max_worker_memory_per_host
    where = "all simulated nodes of a point on one machine" if capacity.hosts_share_one_machine else "per host"
    if need <= memory:
        return []
    return [f"memory: workers need {format_bytes(need)} ({where}); {capacity.host_memory_source} has "
            f"{format_bytes(memory)}"]


def capacity_notes(summary: PlanSummary, capacity: Capacity) -> list[str]:
    """What could not be checked, and DLIO's own memory need where it would not fit the host (ours does)."""
    notes = [f"free space on {fs} not checked ({capacity.free_where.get(fs, '?')})"
             for fs in summary.max_disk_bytes_needed if capacity.free_bytes.get(fs) is None]
    memory = capacity.host_memory_bytes
    if memory is None:
        notes.append(f"host memory not checked: {capacity.host_memory_source}")
    elif summary.max_dlio_memory_per_host > memory:
        notes.append(f"DLIO itself would need {format_bytes(summary.max_dlio_memory_per_host)} per host for the "
                     f"largest point ({capacity.host_memory_source} has {format_bytes(memory)}); studyctl's "
                     "workers do not")
    return notes
