"""Ceiling points: one per resource shape, measuring what that shape's storage, network and memory
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

from studyctl.definition.checkpoint.points import ENGINE_OPTION_DEFAULTS, Point
from studyctl.definition.inputs.ceilings_spec import CeilingsMode
from studyctl.definition.inputs.tdist import log_interval
from studyctl.definition.planning.shapes import Shape, shape_of
from studyctl.units import GIB, MIB

if TYPE_CHECKING:  # the worker imports this module, never the sweep's (YAML)
    from studyctl.definition.planning.sweep import Estimate, SweepFile


class _Planned(Protocol):
    """definition.planning.expand.PlannedPoint, which imports this module (a ceiling is made from its source's)."""

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
# A ceiling is a distribution: each probe runs rounds until the 95% interval of every rate it measures is within
# ±CI_TARGET of it as a factor (Student's t over the rounds' logarithms, `tdist.log_interval`: the interval the
# report shows, so the probe stops when what the user reads is narrow), at least MIN_ROUNDS (a CI needs a spread) and at
# most MAX_ROUNDS, and no new round once its budget would be spent (STORAGE_BUDGET_S for the storage probes
# together, STREAM_BUDGET_S for each network and memory-copy probe). Each rate's figure is the median of its
# rounds; every round is recorded (CeilingInfo.rounds). ±10%: a ceiling share of 90% vs 100% is then told apart
# from noise of the probe; three rounds of a steady stream (spread under 4%) are enough.
CI_TARGET = 0.10
MIN_ROUNDS = 3
MAX_ROUNDS = 10
# A ceiling costs no more than the cell it judges: its storage rounds move at most what COST_REPETITIONS
# repetitions of its source point move (its checkpoints written and its restores read; `round_limit`, which caps
# its network and memory probes' rounds too), and at least MIN_ROUNDS rounds. A small study's probe would otherwise
# run MAX_ROUNDS rounds of a noisy disk and cost several times its own points; a large one's is bound by
# STORAGE_BUDGET_S first. Three: a cell's CI needs three
# repetitions, and the ceiling is then measured as often as the cell it is compared with.
COST_REPETITIONS = 3
# fio's ramp_time: the first storage round of a probe meets what ran before it (the previous point's write-back
# still draining, its files' removal, a cold directory): on this machine's disk a buffered write's first round ran
# at 0.16-0.27 GiB/s against 0.5-0.9 for the rounds after it. The ramp rounds run first, on the clock of the
# budget, and are not recorded.
RAMP_ROUNDS = 1
# Storage rounds stop starting after this many seconds of probing (all storage probes together, their off-clock
# eviction and removal included). With PROBE_STREAM_S it bounds a ceiling's cost at any scale: at most about a
# minute of the shape's nodes (a few percent of a study's node-hours at the seeds' full-scale layouts, where a
# measure point of 128 nodes runs for an hour), instead of moving every rank's whole shard three times.
STORAGE_BUDGET_S = 60.0
# A network or memory-copy probe stops starting rounds after this (each round moves at most MEMCPY_MAX_BYTES
# per rank: well under a second on any node, so this is a guard against a congested network, not the rule).
STREAM_BUDGET_S = 10.0
# One storage probe's phase (a write, fsynced, or a cold read) per rank: a stream of at most PROBE_MAX_BYTES of
# its shard that stops starting new blocks after PROBE_STREAM_S, as fio's time_based runs do (the fsync of what was
# written is on the clock). A rank's rate is stable well within either bound: a sequential stream of one file
# reaches its steady rate within its first few hundred MiB; 1 GiB per rank is also past the write-back cache a
# node's ranks share (8 ranks: 8 GiB, above the dirty-page limit that makes buffered writes wait for the device).
PROBE_MAX_BYTES = 1 << 30
PROBE_STREAM_S = 5.0
# The memory-copy probe copies a rank's largest shard, up to this, in one memmove from a state into a snapshot as
# worker.persist.Snapshot does; the network probes send as much. Large enough to stream through memory, not cache,
# on today's nodes (a socket's last-level cache, shared by its ranks, is at most about 1 GiB) with the
# non-temporal stores a real snapshot's copy gets, so a larger shard streams at the same rate and copying or
# sending more would only add run time; small enough that two of them per rank cost a node little (plan counts
# them).
MEMCPY_MAX_BYTES = 256 * MIB
# Storage probes, each round written and read: every rank its largest shard, then its even share (each up to
# PROBE_MAX_BYTES and PROBE_STREAM_S).
PROBES = ("largest", "even")
# An even share whose probe would stream within this fraction of the largest's is the same measurement (a layout
# already even, e.g. ZeRO-3, or both shards above PROBE_MAX_BYTES): the even probe is not run again, its figures
# are the largest's (half the probe's time saved).
EVEN_SAME = 0.05


def probes_run(point: Point) -> dict[str, int]:
    """The storage probes a ceiling point runs, with the bytes each streams per rank at most (its shard up to
    PROBE_MAX_BYTES; the even one only where that differs)."""
    largest, even = (min(b, PROBE_MAX_BYTES) for b in probe_bytes(point))
    return {"largest": largest} if even >= largest * (1 - EVEN_SAME) else {"largest": largest, "even": even}


def narrow(rates: list[float]) -> bool:
    """Whether these rounds' 95% interval (`tdist.log_interval`, the one the report shows) lies within ±CI_TARGET
    of their central figure, as a factor either way."""
    n, low, high, _ = log_interval(rates)
    return n >= 2 and high / low <= (1 + CI_TARGET) ** 2


def another_round(rates: dict[str, list[float]], done: int, elapsed_s: float, longest_s: float,
                  budget_s: float, max_rounds: int = MAX_ROUNDS) -> bool:
    """The probe rule: after `done` recorded rounds (the longest took `longest_s`, all of them and the ramp
    `elapsed_s`), whether to run one more. The worker asks it after every round; plan asks it of rounds that never
    narrow, each of the estimated length (`planned_rounds`), so the estimate is the rule's most."""
    if done < MIN_ROUNDS:
        return True
    if done >= max_rounds or all(narrow(r) for r in rates.values()):
        return False
    return elapsed_s + longest_s <= budget_s


def planned_rounds(round_s: float, budget_s: float, max_rounds: int = MAX_ROUNDS, ramp: int = 0) -> int:
    """The most recorded rounds the rule runs when each takes `round_s` (after `ramp` unrecorded ones) and the CI
    never narrows (a rate of no rounds)."""
    done = 1
    while another_round({"never narrows": []}, done, (ramp + done) * round_s, round_s, budget_s, max_rounds):
        done += 1
    return done


def round_limit(point: Point) -> int:
    """The most storage rounds a ceiling of `point` records: what COST_REPETITIONS repetitions of its source point
    move (every checkpoint written, what storage serves each restore), in rounds that each move every probe's
    bytes written and read, within [MIN_ROUNDS, MAX_ROUNDS]."""
    from studyctl.definition.checkpoint.restore_reads import storage_read_bytes  # it imports the points, which import
    # this

    opts = point.checkpoint
    source = point.layout().total_bytes * opts.writes + storage_read_bytes(point.model, point.parallelism,
                                                                           opts) * opts.reads
    per_round = 2 * sum(probes_run(point).values()) * point.world_size
    return max(MIN_ROUNDS, min(MAX_ROUNDS, COST_REPETITIONS * source // max(1, per_round)))


class CeilingSources:
    """Per resource shape, the runnable measure point whose largest rank writes the most (the first on a tie): the
    source of the shape's ceiling point (an auxiliary kind: `definition.planning.auxiliary`)."""

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
    """The shape's ceiling: storage probes, whatever engine its source point checkpoints through, read cold the
    way its shape's I/O mode reads (`cold_read: auto`: a buffered shape's probe is a buffered read of evicted
    files with readahead, a direct or hybrid shape's an O_DIRECT read), whatever its source point's cold_read:
    a ceiling is its shape's (a source reading warm, `none`, would make its probe the page cache's)."""
    opts = point.checkpoint.model_copy(update={**ENGINE_OPTION_DEFAULTS, "engine": "stream", "cold_read": "auto"})
    return point.model_copy(update={"role": "ceiling", "repetition": 0, "recovery": None, "checkpoint": opts})


def probe_bytes(point: Point) -> tuple[int, int]:
    """(largest shard, even share) per rank: the most bytes any rank of the point writes, and its checkpoint
    spread evenly over its ranks."""
    lay = point.layout()
    return lay.bytes_per_rank_max, lay.total_bytes // point.world_size


def ceiling_sized(point: Point, estimate: Estimate) -> dict[str, Any]:
    """A ceiling point's plan figures: what its probes move, not what its source point checkpoints. One "write"
    is a round of every storage probe (every rank its largest shard, then its even share, each as far as the
    probe streams), `storage_plan`'s rounds of them, its ramp included (the result records the rounds after it)."""
    largest, even = probe_bytes(point)
    world = point.world_size
    plan = storage_plan(point, estimate)
    seconds = estimate.overhead_s + plan.runs * plan.round_s
    return {"checkpoint_bytes": plan.written * world, "read_bytes_per_restore": plan.read * world,
            "storage_read_bytes_per_restore": plan.read * world, "broadcast_bytes_per_restore": 0,
            "writes": plan.runs, "reads": plan.runs, "bytes_per_rank_max": largest, "bytes_per_rank_min": even,
            "files_per_checkpoint": len(probes_run(point)) * world, "disk_bytes_needed": max_probe_bytes(point),
            "disk_bytes_required": int(max_probe_bytes(point) * (1 + point.checkpoint.free_space_margin)),
            "worker_memory_per_host_bytes": ceiling_memory_bytes(point, point.ranks_per_node),
            "worker_memory_per_point_bytes": ceiling_memory_bytes(point, world), "simulated_training_s": 0.0,
            "estimated_seconds": round(seconds, 1),
            "node_hours": point.nodes * seconds / 3600}


@dataclasses.dataclass(frozen=True)
class StoragePlan:
    rounds: int  # recorded, after the ramp
    written: int  # bytes per rank per round, all storage probes together
    read: int
    round_s: float

    @property
    def runs(self) -> int:
        """Every round the probe runs: its ramp and its recorded rounds (what it moves and costs)."""
        return RAMP_ROUNDS + self.rounds


def storage_plan(point: Point, estimate: Estimate | None = None) -> StoragePlan:
    """A ceiling's storage probes at the estimate's rate, its nodes' share per rank (the sweep's `estimate:`;
    None: its default). A read or an O_DIRECT write streams its bytes or stops at PROBE_STREAM_S; a buffered write
    is fsynced on the clock, and the page cache may take all its bytes before the stream's time is up, so it is
    counted whole; a read reads what was written. A round writes and reads every probe; rounds follow the probe
    rule with a CI that never narrows (the most the rule runs)."""
    from studyctl.definition.planning.sweep import Estimate  # it imports this module

    rate = (estimate or Estimate()).GiBps_per_node * GIB / point.ranks_per_node
    streamed = int(rate * PROBE_STREAM_S)
    written = [b if point.io_mode == "buffered" else min(b, streamed) for b in probes_run(point).values()]
    read = [min(b, streamed) for b in written]
    round_s = (sum(written) + sum(read)) / rate
    rounds = planned_rounds(round_s, STORAGE_BUDGET_S, round_limit(point), RAMP_ROUNDS)
    return StoragePlan(rounds, sum(written), sum(read), round_s)


def max_probe_bytes(point: Point) -> int:
    """The probe's files on disk at once, all ranks: one per rank, of its largest probe (removed after each)."""
    return max(probes_run(point).values()) * point.world_size


def ceiling_moved_bytes(point: Point, estimate: Estimate | None = None) -> int:
    """Bytes a ceiling point's storage probes write and read, all rounds, at the estimate's rate (what its run
    time is estimated from): `storage_plan`."""
    plan = storage_plan(point, estimate)
    return plan.runs * (plan.written + plan.read) * point.world_size


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
    from studyctl.definition.planning.strategies import WORKER_BASE_BYTES  # it imports the sweep, which imports this

    return ranks * (point.checkpoint.buffer_mib * MIB + WORKER_BASE_BYTES + 2 * copy_piece(largest))


def shared_record(study_dir: Path, shape_key: str, filesystem_path: str, nodes: list[str]) -> Path:
    """Where a study says it measured this shape's ceiling on this path and these nodes (ceilings: shared):
    `<study>/ceilings/<shape>.<hash>.json`, holding the result's path relative to the study."""
    key = json.dumps([shape_key, os.path.realpath(filesystem_path), sorted(set(nodes))])
    return study_dir / "ceilings" / f"{shape_key}.{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
