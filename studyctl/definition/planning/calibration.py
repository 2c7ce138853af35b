"""Calibration points: a few runs at larger scales, per resource shape and fit group, that projections to full
size are fitted from (the fit is `studyctl.analysis.projection`).

A small checkpoint's time is mostly fixed costs, so bytes over a scaled-down run's bandwidth overstates the
full-size time. The fit pools only runs of one shape and one fit group (`definition.planning.fit_group`: strategy,
fsync,
cold reads, ...), so calibration is per (shape, group): a group whose largest measured scale is below
`calibration.below_scale` gets, from its largest checkpoint (its biggest measure point), `calibration.scales` extra
scales up to `calibration.max_scale`, evenly spaced on a log axis, each run `calibration.repetitions` times (at most
the study's). Each is bounded: its disk need by `max_disk_gib` and by the free space its filesystem has where plan
and submit read it (its scale lowered to fit; under free space, down to the next of FREE_SPACE_STEPS, so a little
more or less free space between two submits mostly names the same point), its workers by `estimate.host_memory_gib`,
and all of them together by a time budget, `budget_share` of the measure points' estimated run time (at least
`min_budget_s`: a study of small points would afford no larger run otherwise) or `budget_s` seconds
(`Estimate.run_seconds`), spent first on every group's largest scale that fits, then on the others. Groups with
measure points at or above the threshold already have their calibration and get none; `plan` says why a group got
none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from studyctl.definition.checkpoint.points import Point
from studyctl.definition.inputs.calibration_spec import CalibrationSpec
from studyctl.definition.planning.fit_group import FitGroup, point_fit_group
from studyctl.definition.planning.planned import PlannedPoint
from studyctl.definition.planning.run_time import point_run_seconds
from studyctl.definition.planning.shapes import Shape, shape_of
from studyctl.definition.planning.strategies import host_memory_bytes
from studyctl.units import GIB, format_bytes

if TYPE_CHECKING:
    from studyctl.definition.planning.sweep import SweepFile

# A lowered scale must still be this many times the largest measured one to tell the fit anything new.
MIN_SPREAD = 1.5
# A scale lowered to the free space is one of these times a power of ten: free space changes between submits, and
# a scale that followed it exactly would make a new calibration point at each.
FREE_SPACE_STEPS = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)

Group = tuple[Shape, FitGroup]  # what one calibration ladder serves


class CalibrationSources:
    """An auxiliary kind (`definition.planning.auxiliary`): what calibration needs of the measure points, gathered as
    they
    stream past: per shape and fit group its largest scale and its largest checkpoint, and the measure points'
    estimated run time (for `budget_share`)."""

    def __init__(self, sweep: SweepFile, free_bytes: Mapping[str, int | None] | None = None) -> None:
        self.sweep = sweep
        self.free_bytes = free_bytes or {}  # per filesystem name, where plan or submit read it (None: not read)
        self.top: dict[Group, float] = {}
        self.source: dict[Group, tuple[int, Point]] = {}
        self.seconds = 0.0

    def add(self, pp: PlannedPoint) -> None:
        point = pp.point
        if pp.excluded or point.role != "measure":
            return
        group = self.group_of(point)
        self.top[group] = max(self.top.get(group, 0.0), point.checkpoint.scale)
        size = point.layout().total_bytes
        if group not in self.source or size > self.source[group][0]:
            self.source[group] = (size, point)
        self.seconds += estimated_run_seconds(point, self.sweep)

    def points(self, first_order: int) -> list[PlannedPoint]:
        """Within the budget, first every group's largest scale that fits it (the one that reaches furthest), then
        the groups' other scales; points in shape and group order, scales ascending, `order` after the measure
        points."""
        if not self.sweep.calibration.enabled:
            return []
        budget = self.budget()
        options = {group: self._options(group) for group in self.groups()}
        chosen: dict[Group, list[list[Point]]] = {group: [] for group in options}
        for first_pass in (True, False):
            for group, runs in options.items():
                for copies in reversed(runs):
                    cost = sum(estimated_run_seconds(p, self.sweep) for p in copies)
                    if copies in chosen[group] or cost > budget:
                        continue
                    chosen[group].append(copies)
                    budget -= cost
                    if first_pass:
                        break
        made = [p for group in chosen for copies in sorted(chosen[group], key=lambda c: c[0].checkpoint.scale)
                for p in copies]
        return [PlannedPoint(p, first_order + i) for i, p in enumerate(made)]

    def groups(self) -> list[Group]:
        """Shapes in order; within one, the group of its largest checkpoint first (the one whose calibration a
        tight budget keeps), ties in the order the measure points came."""
        seen = {group: i for i, group in enumerate(self.source)}
        return sorted(self.source, key=lambda g: (g[0], -self.source[g][0], seen[g]))

    def group_of(self, point: Point) -> Group:
        """The calibration ladder a point belongs to: its shape and fit group (as its result rows will carry it)."""
        objects = self.sweep.filesystems[point.filesystem].object_store is not None
        return shape_of(point), point_fit_group(point, objects)

    def budget(self) -> float:
        """The estimated run seconds all calibration points together may take."""
        spec = self.sweep.calibration
        return spec.budget_s or max(spec.budget_share * self.seconds, spec.min_budget_s)

    def why_none(self, group: Group) -> str:
        """Why a group gets no calibration points, naming the setting that decided it."""
        spec, top, shape = self.sweep.calibration, self.top[group], group[0]
        if not spec.enabled:
            return "calibration is off (calibration.enabled)"
        if top >= spec.below_scale:
            return f"at or above calibration.below_scale {spec.below_scale:g}: its own points are its calibration"
        if not ladder(top, spec):
            return f"calibration.max_scale {spec.max_scale:g} is not above the scale measured"
        runs = self._options(group)
        if not runs:
            memory = self.sweep.estimate.host_memory_gib
            free = self.free_bytes.get(shape.filesystem)
            return (f"no scale {MIN_SPREAD:g}× the measured one or more fits calibration.max_disk_gib "
                    f"{spec.max_disk_gib:g} GiB" + (f", the {format_bytes(free)} free on filesystem "
                                                     f"{shape.filesystem}" if free is not None else "")
                    + (f" and estimate.host_memory_gib {memory:g} GiB" if memory else ""))
        cheapest = min(sum(estimated_run_seconds(p, self.sweep) for p in copies) for copies in runs)
        setting = "calibration.budget_s" if spec.budget_s else "calibration.budget_share and min_budget_s"
        others = ", spent on other shapes and fit groups first" if cheapest <= self.budget() else ""
        return (f"over the time budget: its cheapest calibration run needs ~{cheapest:.0f} s (estimated), the "
                f"study's calibration budget is {self.budget():.0f} s{others} ({setting})")

    def _options(self, group: Group) -> list[list[Point]]:
        """The group's calibration runs (each scale's repetitions), within disk and memory, scales ascending."""
        spec, top, source = self.sweep.calibration, self.top[group], self.source[group][1]
        shape = group[0]
        if top >= spec.below_scale:
            return []  # measured at a large enough scale already: its own points are its calibration
        runs = []
        for scale in ladder(top, spec):
            fitted = _bounded(source, scale, spec, self.sweep, self.free_bytes.get(shape.filesystem))
            if fitted is not None and fitted >= MIN_SPREAD * top:
                reps = min(spec.repetitions, self.sweep.repetitions)
                runs.append([calibration_copy(source, fitted, rep) for rep in range(reps)])
        return runs

    def shapes(self, made: list[PlannedPoint]) -> list[ShapeCalibration]:
        """Per shape and fit group: what its projections to full size will rest on."""
        out = []
        for group in self.groups():
            source = self.source[group][1]
            mine = [pp.point.checkpoint.scale for pp in made if self.group_of(pp.point) == group]
            full = source.nominal_layout()
            writers = max(1, full.writer_ranks)
            out.append(ShapeCalibration(group[0].key, self.top[group], tuple(sorted(set(mine))), len(mine),
                                        f"{source.model.name} ZeRO-{source.zero_stage}", full.total_bytes / writers,
                                        full.files_per_checkpoint / writers, "" if mine else self.why_none(group),
                                        group[1]))
        return out


@dataclass(frozen=True)
class ShapeCalibration:
    """What a shape and fit group's projections rest on: its largest measured scale and the calibration scales it
    adds; and its largest checkpoint at full size per writing rank (what `plan` projects, where an earlier run gives
    a fit)."""

    shape: str  # Shape.key
    measured_scale: float
    scales: tuple[float, ...]  # calibration scales (empty: none)
    points: int  # calibration points, repetitions included
    source: str  # the checkpoint they run: model and ZeRO stage
    full_bytes_per_rank: float
    files_per_rank: float
    why_none: str = ""  # where `scales` is empty: why (`CalibrationSources.why_none`)
    group: FitGroup | None = None  # the runs its fit pools (`definition.planning.fit_group`)


def shape_calibrations(sweep: SweepFile, planned: Iterable[PlannedPoint],
                       free_bytes: Mapping[str, int | None] | None = None) -> list[ShapeCalibration]:
    sources = CalibrationSources(sweep, free_bytes)
    for pp in planned:
        sources.add(pp)
    return sources.shapes(sources.points(0))


def ladder(top: float, spec: CalibrationSpec) -> list[float]:
    """`spec.scales` scales from above `top` to `max_scale`, evenly spaced on a log axis (3 significant digits)."""
    if spec.max_scale <= top:
        return []
    ratio = spec.max_scale / top
    return sorted({float(f"{top * ratio ** (k / spec.scales):.3g}") for k in range(1, spec.scales + 1)})


def calibration_copy(source: Point, scale: float, repetition: int) -> Point:
    return source.model_copy(update={"checkpoint": source.checkpoint.model_copy(update={"scale": scale}),
                                     "role": "calibration", "repetition": repetition, "recovery": None})


def _bounded(source: Point, scale: float, spec: CalibrationSpec, sweep: SweepFile, free: int | None = None
             ) -> float | None:
    """`scale`, lowered until the point's disk need fits `max_disk_gib` and the filesystem's `free` bytes; None
    where its workers would not fit the host memory the sweep states."""
    point = calibration_copy(source, scale, 0)
    need = point.checkpoint.disk_bytes_required(point.layout().total_bytes)
    limit = spec.max_disk_gib * GIB
    if need > limit:
        scale = float(f"{scale * limit / need * 0.99:.3g}")
        point = calibration_copy(source, scale, 0)
        need = point.checkpoint.disk_bytes_required(point.layout().total_bytes)
    if free is not None and need > free:
        scale = _floor_to_steps(scale * free / need * 0.99)
        point = calibration_copy(source, scale, 0)
    memory = sweep.estimate.host_memory_gib
    if memory is not None and \
            host_memory_bytes(point.model, point.parallelism, point.ranks_per_node, point.checkpoint) > memory * GIB:
        return None
    return scale


def _floor_to_steps(x: float) -> float:
    """`x` rounded down to the next of FREE_SPACE_STEPS times a power of ten (a scale that fits stays one that fits)."""
    if x <= 0:
        return 0.0
    power = 10.0 ** math.floor(math.log10(x))
    step = max((s for s in FREE_SPACE_STEPS if s * power <= x * (1 + 1e-9)), default=1.0)
    return float(f"{step * power:.3g}")


def estimated_run_seconds(point: Point, sweep: SweepFile) -> float:
    """A calibration point's run time as the plan estimates it (`run_time`)."""
    return point_run_seconds(point, sweep.estimate)
