"""What a study will cost before it runs: per-point sizes, memory, disk, node-hours."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from studyctl.spec.catalog import ModelSpec
from studyctl.spec.expand import PlannedPoint
from studyctl.spec.layout import Parallelism, summarize
from studyctl.spec.points import CheckpointOptions
from studyctl.spec.sweep import Estimate, SweepFile
from studyctl.units import GIB, MIB

# Resident memory of one worker rank besides its buffer (Python, mpi4py, MPICH), measured ~80 MiB.
WORKER_BASE_BYTES = 96 * MIB
PLAN_AXES = ("model", "zero_stage", "nodes", "ranks_per_node", "tensor_parallel", "pipeline_parallel", "filesystem",
             "io_mode", "repetition")


def disk_steps_needed(writes: int, reads: int, keep: bool = False) -> int:
    """Step directories on disk at the peak: the ones restores read, plus one being written (all with keep)."""
    if writes == 0 or keep:
        return writes
    kept = min(writes, reads)
    return kept + (1 if writes > kept else 0)


def plan_row(pp: PlannedPoint, sweep: SweepFile) -> dict[str, Any]:
    """One JSON-able row; the keys the `plan --json` contract names come first."""
    p = pp.point
    opts = p.checkpoint
    row: dict[str, Any] = {
        "point_id": p.point_id,
        "model": p.model.name,
        "zero_stage": p.zero_stage,
        "tensor_parallel": p.tensor_parallel,
        "pipeline_parallel": p.pipeline_parallel,
        "data_parallel": p.data_parallel,
        "nodes": p.nodes,
        "ranks_per_node": p.ranks_per_node,
        "world_size": p.world_size,
        "filesystem": p.filesystem,
        "io_mode": p.io_mode,
        "repetition": p.repetition,
        "excluded": pp.excluded,
        "exclude_kind": pp.exclusion.kind.value if pp.exclusion else None,
        "exclude_reason": pp.exclude_reason,
        "scale": opts.scale,
        "writes": opts.writes,
        "reads": opts.reads,
    }
    if pp.exclusion is not None and pp.exclusion.infeasible:
        row.update(dict.fromkeys(SIZED_KEYS))
        return row
    row.update(_sized(p.model, p.parallelism, p.nodes, p.ranks_per_node, opts, sweep.estimate))
    return row


SIZED_KEYS = ("checkpoint_bytes", "nominal_checkpoint_bytes", "bytes_per_rank_max", "bytes_per_rank_min",
              "files_per_checkpoint", "writer_ranks", "disk_bytes_needed", "worker_memory_per_host_bytes",
              "dlio_memory_per_host_bytes", "estimated_seconds", "node_hours")


@lru_cache(maxsize=65536)
def _sized(model: ModelSpec, par: Parallelism, nodes: int, ranks_per_node: int, opts: CheckpointOptions,
           estimate: Estimate) -> dict[str, Any]:
    """Size and cost fields; the same for every filesystem and repetition of a cell."""
    lay = summarize(model, par, opts.scale)
    nominal = summarize(model, par, 1.0)
    moved = lay.total_bytes * (opts.writes + opts.reads)
    seconds = estimate.overhead_s + moved / (nodes * estimate.GiBps_per_node * GIB)
    return {
        "checkpoint_bytes": lay.total_bytes,
        "nominal_checkpoint_bytes": nominal.total_bytes,
        "bytes_per_rank_max": lay.bytes_per_rank_max,
        "bytes_per_rank_min": lay.bytes_per_rank_min,
        "files_per_checkpoint": lay.files_per_checkpoint,
        "writer_ranks": lay.writer_ranks,
        "disk_bytes_needed": lay.total_bytes * disk_steps_needed(opts.writes, opts.reads, opts.keep),
        "worker_memory_per_host_bytes": ranks_per_node * (opts.buffer_mib * MIB + WORKER_BASE_BYTES),
        # DLIO holds each rank's whole state in RAM, twice while restoring.
        "dlio_memory_per_host_bytes": ranks_per_node * (2 * lay.bytes_per_rank_max + WORKER_BASE_BYTES),
        "estimated_seconds": round(seconds, 1),
        "node_hours": nodes * seconds / 3600,
    }


def plan_rows(points: Iterable[PlannedPoint], sweep: SweepFile) -> Iterator[dict[str, Any]]:
    for pp in points:
        yield plan_row(pp, sweep)


@dataclass
class PlanSummary:
    points: int = 0
    runnable: int = 0
    excluded: int = 0
    bytes_to_write: int = 0
    bytes_to_read: int = 0
    node_hours: float = 0.0
    max_disk_bytes_needed: dict[str, int] = field(default_factory=dict)  # per filesystem
    axis_counts: dict[str, Counter] = field(default_factory=dict)
    exclude_reasons: Counter = field(default_factory=Counter)

    def add(self, row: dict[str, Any]) -> None:
        self.points += 1
        counts = self.axis_counts
        for axis in PLAN_AXES:
            if axis not in counts:
                counts[axis] = Counter()
            counts[axis][row[axis]] += 1
        if row["excluded"]:
            self.excluded += 1
            self.exclude_reasons[row["exclude_reason"]] += 1
            return
        self.runnable += 1
        self.bytes_to_write += row["checkpoint_bytes"] * row["writes"]
        self.bytes_to_read += row["checkpoint_bytes"] * row["reads"]
        self.node_hours += row["node_hours"]
        fs = row["filesystem"]
        self.max_disk_bytes_needed[fs] = max(self.max_disk_bytes_needed.get(fs, 0), row["disk_bytes_needed"])


def summarize_plan(rows: Iterable[dict[str, Any]]) -> PlanSummary:
    summary = PlanSummary()
    for row in rows:
        summary.add(row)
    return summary
