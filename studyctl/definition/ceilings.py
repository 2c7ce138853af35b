"""Ceiling points (issue 18): one per resource shape, measuring what that shape's storage, network and memory
reach, through the same backend, nodes, ranks, filesystem, I/O mode and block as the study's own points.

A ceiling point is a copy of the shape's point whose largest rank writes the most bytes, with role "ceiling" and
repetition 0; the worker (worker.ceiling) runs probes on it instead of checkpoints. The sweep's `ceilings:` says
whether a study gets them (CeilingsMode).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from studyctl.definition.ceilings_spec import CeilingsMode
from studyctl.definition.points import ENGINE_OPTION_DEFAULTS, Point
from studyctl.definition.shapes import Shape, shape_of
from studyctl.units import GIB, MIB

if TYPE_CHECKING:  # the worker imports this module, never the sweep's (YAML)
    from studyctl.definition.sweep import Estimate, SweepFile


class _Planned(Protocol):
    """definition.expand.PlannedPoint, which imports this module (a ceiling is made from its source's)."""

    @property
    def point(self) -> Point: ...
    @property
    def order(self) -> int: ...
    @property
    def excluded(self) -> bool: ...


P = TypeVar("P", bound=_Planned)
# `auto` adds ceilings up to this many shapes. Each ceiling costs about one measure point (it moves its largest
# shard and the even share per rank, REPEATS times); a study of more shapes is a scan over the hardware whose
# own cells already trace what each shape reaches, and 8 more points would be a visible share of its node-hours.
AUTO_MAX_SHAPES = 8
# Measurements per probe; the median is reported (one slow outlier on a shared machine does not set a ceiling).
REPEATS = 3
# The memory-copy probe copies a rank's largest shard, up to this, in one memmove from a state into a snapshot as
# worker.persist.Snapshot does; the network probes send as much. Large enough to stream through memory, not cache,
# on today's nodes (a socket's last-level cache, shared by its ranks, is at most about 1 GiB) with the
# non-temporal stores a real snapshot's copy gets, so a larger shard streams at the same rate and copying or
# sending all of it REPEATS times would only add run time (unlike storage, whose rate depends on a file's size:
# its probes move the whole shard); small enough that two of them per rank cost a node little (plan counts them).
MEMCPY_MAX_BYTES = 256 * MIB
# Storage probes move these bytes per rank, REPEATS times, written and read: largest shard, then the even share.
PROBES = ("largest", "even")
# The even share within this fraction of the largest shard is the same measurement (a layout already even, e.g.
# ZeRO-3): the even probe is not run again, its figures are the largest's (half the probe's bytes saved).
EVEN_SAME = 0.05


def probes_run(point: Point) -> dict[str, int]:
    """The storage probes a ceiling point runs, with their bytes per rank (the even one only where it differs)."""
    largest, even = probe_bytes(point)
    return {"largest": largest} if even >= largest * (1 - EVEN_SAME) else {"largest": largest, "even": even}


class CeilingSources:
    """Per resource shape, the runnable measure point whose largest rank writes the most (the first on a tie): the
    source of the shape's ceiling point (an auxiliary kind: `definition.auxiliary`)."""

    def __init__(self, sweep: SweepFile) -> None:
        self.mode: CeilingsMode = sweep.ceilings
        self.largest: dict[Shape, Any] = {}  # a planned point
        # the probes are POSIX files (fio's pattern): an object store's shapes have no ceiling point
        self.objects = {name for name, fs in sweep.filesystems.items() if fs.object_store is not None}

    def add(self, pp: _Planned) -> None:
        p = pp.point
        if pp.excluded or p.role != "measure" or p.filesystem in self.objects:
            return
        shape = shape_of(p)
        best = self.largest.get(shape)
        if best is None or p.layout().bytes_per_rank_max > best.point.layout().bytes_per_rank_max:
            self.largest[shape] = pp

    def points(self, first_order: int) -> list[Any]:
        if self.mode == "off" or (self.mode == "auto" and len(self.largest) > AUTO_MAX_SHAPES):
            return []
        return [dataclasses.replace(pp, point=ceiling_of(pp.point), order=first_order + i)
                for i, pp in enumerate(self.largest.values())]


def ceiling_of(point: Point) -> Point:
    """The shape's ceiling: storage probes, whatever engine its source point checkpoints through."""
    opts = point.checkpoint.model_copy(update={**ENGINE_OPTION_DEFAULTS, "engine": "stream"})
    return point.model_copy(update={"role": "ceiling", "repetition": 0, "recovery": None, "checkpoint": opts})


def probe_bytes(point: Point) -> tuple[int, int]:
    """(largest shard, even share) per rank: the most bytes any rank of the point writes, and its checkpoint
    spread evenly over its ranks."""
    lay = point.layout()
    return lay.bytes_per_rank_max, lay.total_bytes // point.world_size


def ceiling_sized(point: Point, estimate: Estimate) -> dict[str, Any]:
    """A ceiling point's plan figures: what its probes move, not what its source point checkpoints. One "write"
    is a round of every storage probe (every rank its largest shard, then its even share), REPEATS of them."""
    largest, even = probe_bytes(point)
    world = point.world_size
    per_round = sum(probes_run(point).values()) * world
    seconds = estimate.overhead_s + ceiling_moved_bytes(point) / (point.nodes * estimate.GiBps_per_node * GIB)
    return {"checkpoint_bytes": per_round, "read_bytes_per_restore": per_round,
            "storage_read_bytes_per_restore": per_round, "broadcast_bytes_per_restore": 0,
            "writes": REPEATS, "reads": REPEATS, "bytes_per_rank_max": largest, "bytes_per_rank_min": even,
            "files_per_checkpoint": len(probes_run(point)) * world, "disk_bytes_needed": max(largest, even) * world,
            "disk_bytes_required": int(max(largest, even) * world * (1 + point.checkpoint.free_space_margin)),
            "worker_memory_per_host_bytes": ceiling_memory_bytes(point, point.ranks_per_node),
            "worker_memory_per_point_bytes": ceiling_memory_bytes(point, world), "simulated_training_s": 0.0,
            "estimated_seconds": round(seconds, 1),
            "node_hours": point.nodes * seconds / 3600}


def ceiling_moved_bytes(point: Point) -> int:
    """Bytes a ceiling point's storage probes write and read: every rank its largest shard and (where it differs)
    its even share, REPEATS rounds (what its run time is estimated from)."""
    return 2 * sum(probes_run(point).values()) * point.world_size * REPEATS


def copy_piece(largest: int) -> int:
    return max(1, min(largest, MEMCPY_MAX_BYTES))


def stream_bytes(point: Point) -> int:
    """Bytes per rank each round of the network and memory-copy probes moves: the largest shard, up to
    MEMCPY_MAX_BYTES (the storage probes move all of it)."""
    return copy_piece(probe_bytes(point)[0])


def ceiling_memory_bytes(point: Point, ranks: int) -> int:
    """What `ranks` ranks of a ceiling point hold: the buffer and interpreter each, and the memory copy's state
    and snapshot."""
    largest = probe_bytes(point)[0]
    from studyctl.definition.strategies import WORKER_BASE_BYTES  # it imports the sweep, which imports this

    return ranks * (point.checkpoint.buffer_mib * MIB + WORKER_BASE_BYTES + 2 * copy_piece(largest))


def shared_record(study_dir: Path, shape_key: str, filesystem_path: str, nodes: list[str]) -> Path:
    """Where a study says it measured this shape's ceiling on this path and these nodes (ceilings: shared):
    `<study>/ceilings/<shape>.<hash>.json`, holding the result's path relative to the study."""
    key = json.dumps([shape_key, os.path.realpath(filesystem_path), sorted(set(nodes))])
    return study_dir / "ceilings" / f"{shape_key}.{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
