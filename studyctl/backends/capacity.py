"""Before anything runs: will a sweep's points find their filesystems, fit the disk, and end within their limit?

`plan` and `submit` ask the same questions here of the backend that will run (`Backend.capacity`,
`Backend.point_time_limit_s`, `Backend.runs_here`), so they judge with the same figures: `plan` warns,
`submit` refuses (exit 2) with nothing started. Host facts come from `studyctl.host` alone.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from studyctl.definition.checkpoint.points import CALIBRATION_STEPS, IDLE_STEPS
from studyctl.definition.inputs.filesystems import ObjectStoreSpec, must_exist
from studyctl.definition.planning.plan import (
    PlanSummary,
    capacity_notes,
    disk_problems,
    estimated_seconds,
    memory_problems,
)
from studyctl.definition.planning.sweep import SweepFile
from studyctl.units import MIB
from worker.claim import misplacement

if TYPE_CHECKING:
    from studyctl.backends.base import Backend
    from studyctl.definition.checkpoint.points import Point
    from studyctl.definition.planning.expand import PlannedPoint


def slurm_node_memory(partition: str | None) -> tuple[int | None, str]:
    """The smallest RealMemory (MiB) of the partition's nodes, from sinfo; None when sinfo cannot say."""
    where = f"the smallest node of partition {partition}" if partition else "the smallest node of the cluster"
    cmd = ["sinfo", "-h", "-N", "-o", "%m"] + (["-p", partition] if partition else [])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{where} (sinfo failed: {exc})"
    values = [int(v.rstrip("+")) for v in proc.stdout.split() if v.rstrip("+").isdigit()]
    if proc.returncode != 0 or not values:
        return None, f"{where} (sinfo: {proc.stderr.strip() or 'no nodes'})"
    return min(values) * MIB, f"Slurm RealMemory of {where}"


@dataclass
class Judgement:
    """What a sweep's points meet where they will run, one line each."""

    refusals: list[str] = field(default_factory=list)  # submit refuses (exit 2); plan says "will not fit"
    warnings: list[str] = field(default_factory=list)  # plan says "will not fit"; the backend refuses per point
    notes: list[str] = field(default_factory=list)  # what could not be checked here


class Judge:
    """Placement, disk, time limit and memory of a sweep's runnable points on `backend`, fed one point at a
    time (`add`), so a caller that streams the points anyway (plan's rows) judges them in the same pass."""

    def __init__(self, sweep: SweepFile, backend: type[Backend]) -> None:
        self.sweep, self.backend = sweep, backend
        self.shared: set[str] = set()
        self.tiers: set[str] = set()
        self.over = OverLimits(sweep, backend)

    def add(self, pp: PlannedPoint) -> None:
        if not pp.excluded:
            self.shared.add(pp.point.filesystem)
            self.tiers.update([pp.point.checkpoint.tier] if pp.point.checkpoint.tier else [])
            self.over.add(pp.point)

    def verdict(self, summary: PlanSummary) -> Judgement:
        """The points added so far, whose rows `summary` totals."""
        placement, notes = placement_problems(self.sweep, self.shared, self.tiers, self.backend.runs_here)
        capacity = self.backend.capacity(self.sweep)
        return Judgement(placement + disk_problems(summary, capacity) + self.over.lines(),
                         memory_problems(summary, capacity), notes + capacity_notes(summary, capacity))


def judge(sweep: SweepFile, backend: type[Backend], points: Iterable[PlannedPoint], summary: PlanSummary) -> Judgement:
    """`Judge` over `points` (their `summary`): one pass (a million need not sit in memory)."""
    judging = Judge(sweep, backend)
    for pp in points:
        judging.add(pp)
    return judging.verdict(summary)


def object_store_problem(url: str, store: ObjectStoreSpec) -> str | None:
    """Whether an object store takes a small object under the filesystem's prefix (s3core's preflight): one line
    naming the target and the cause (unreachable, bad credentials, no such bucket, denied), or None. A store the
    user did not supply (a study's own sweep copy names it: `objstore.trust`) is refused without a request."""
    from studyctl.definition.checkpoint.objects import object_target
    from studyctl.objstore import trust
    from studyctl.objstore.preflight import target_problem

    target = object_target(url, store)
    return trust.refusal(target) or target_problem(target)


def placement_problems(sweep: SweepFile, shared: set[str], tiers: set[str], runs_here: bool) \
        -> tuple[list[str], list[str]]:
    """The worker's own placement check (worker.claim), made here on the filesystems points write: shared ones
    this machine sees, and node-local tiers where the workers run on this machine. (problems, notes)"""
    problems, notes = [], []
    for name in sorted(shared | tiers):
        fs = sweep.filesystems[name]
        if fs.object_store is not None:  # reached over the network: the same from here as from every node
            problem = object_store_problem(fs.path, fs.object_store)
            problems += [f"filesystems.{name}: {problem}"] if problem else []
            continue
        if not runs_here and name not in shared:
            notes.append(f"filesystem {name} ({fs.path}) is a node-local tier: each node's worker checks it")
            continue
        if not runs_here and not os.path.isdir(must_exist(fs.path)):
            notes.append(f"filesystem {name}: {must_exist(fs.path)} is not visible here: the workers check it")
            continue
        wrong = misplacement(fs.path, fs.kind)
        if wrong:
            key, reason = wrong
            problems.append(f"filesystems.{name}.{key}: {reason}")
    return problems, notes


class OverLimits:
    """Points whose estimate (their simulated training included) exceeds the limit they will run under."""

    def __init__(self, sweep: SweepFile, backend: type[Backend]) -> None:
        self.sweep, self.backend = sweep, backend
        self.over: dict[int, tuple[int, float, Point]] = {}  # limit → (points over it, the slowest, its point)

    def add(self, point: Point) -> None:
        limit = self.backend.point_time_limit_s(self.sweep, point)
        seconds = estimated_seconds(point, self.sweep) if limit is not None else 0.0
        if limit is not None and seconds > limit:
            count, slowest, worst = self.over.get(limit, (0, 0.0, point))
            self.over[limit] = (count + 1, max(slowest, seconds), point if seconds >= slowest else worst)

    def lines(self) -> list[str]:
        """One line per limit, with the slowest point's figures."""
        out = []
        for limit, (count, slowest, point) in sorted(self.over.items()):
            opts = point.checkpoint
            training = opts.simulated_training_s()
            why = (f", {training:,.0f} s of it simulated training: {opts.simulated_steps()} steps ({CALIBRATION_STEPS} "
                   f"+ {opts.writes} writes × {2 * IDLE_STEPS + 1}) × training.simulated_step.compute_s "
                   f"{opts.step_s:g} s") if training else ""
            out.append(f"time: {count} point(s) need an estimated up to {slowest:,.0f} s (point {point.point_id}"
                       f"{why}), over the {limit:,} s they may run ({self.backend.time_limit_setting}): raise it (or "
                       "the sweep's estimate:, if too pessimistic)")
        return out
