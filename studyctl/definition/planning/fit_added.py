"""Points studyctl adds that would not fit where they run: left out with a line, never the study refused.

An added point (a ceiling, a calibration run: `definition.planning.auxiliary`) meets the judgements a measure point
meets
before it runs (`backends.capacity`): the free space of its filesystem (its peak plus
checkpoint.free_space_margin), the memory of the hosts that run its workers, and the time limit it runs under. A
measure point that fails one refuses the study; an added one is the study's own business, so it is left out and
a line says which point, which limit and by how much. Calibration lowers its scales to the free space first
(`definition.planning.calibration`); `lowered_lines` says where that changed what a shape calibrates at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from studyctl.definition.checkpoint.points import Point
from studyctl.definition.planning.auxiliary import with_auxiliary
from studyctl.definition.planning.calibration import CalibrationSources
from studyctl.definition.planning.plan import Capacity, estimated_seconds, plan_row
from studyctl.definition.planning.plan_row import SizedColumns
from studyctl.definition.planning.planned import PlannedPoint
from studyctl.definition.planning.shapes import shape_of
from studyctl.units import format_bytes

if TYPE_CHECKING:
    from studyctl.definition.planning.sweep import SweepFile

TimeLimit = Callable[[Point], "int | None"]  # the limit a point runs under on the backend (None: none)


def describe(point: Point) -> str:
    """An added point as a line names it: its role, id, checkpoint, scale and shape."""
    return (f"{point.role} point {point.point_id} ({point.model.name} ZeRO-{point.zero_stage} at scale "
            f"{point.checkpoint.scale:g}, shape {shape_of(point).key})")


def _sized(pp: PlannedPoint, sweep: SweepFile) -> SizedColumns:
    """An added point's sizes (its layout is its measured point's, which is possible)."""
    sized = plan_row(pp, sweep).sized
    assert sized is not None, pp.point.point_id
    return sized


def misfit(pp: PlannedPoint, sweep: SweepFile, capacity: Capacity, time_limit: TimeLimit) -> str | None:
    """Which limit the point exceeds and by how much, as `backends.capacity` judges a measure point; None: it fits."""
    row = _sized(pp, sweep)
    fs = pp.point.filesystem
    free, need = capacity.free_bytes.get(fs), row.disk_bytes_required
    if free is not None and need > free:
        return (f"it needs {format_bytes(need)} free on filesystem {fs} (its peak + checkpoint.free_space_margin), "
                f"{format_bytes(free)} free at {capacity.free_where.get(fs, '?')}: {format_bytes(need - free)} short")
    memory = capacity.host_memory_bytes
    shared = capacity.hosts_share_one_machine
    wanted = row.worker_memory_per_point_bytes if shared else row.worker_memory_per_host_bytes
    if memory is not None and wanted > memory:
        where = "all simulated nodes of the point on one machine" if shared else "per host"
        return (f"its workers need {format_bytes(wanted)} of memory ({where}), {capacity.host_memory_source} has "
                f"{format_bytes(memory)}: {format_bytes(wanted - memory)} short")
    limit = time_limit(pp.point)
    seconds = estimated_seconds(pp.point, sweep) if limit is not None else 0.0
    if limit is not None and seconds > limit:
        return f"it needs an estimated {seconds:,.0f} s, over the {limit:,} s it may run: {seconds - limit:,.0f} s over"
    return None


def within_capacity(sweep: SweepFile, measured: Iterable[PlannedPoint], capacity: Capacity, time_limit: TimeLimit,
                    notes: list[str]) -> Iterator[PlannedPoint]:
    """The measure points streamed through, then the points studyctl adds, calibration within the free space and
    each within `capacity` and `time_limit` (`fit_added`); once streamed, `notes` holds a line for each added point
    left out and each shape whose calibration the free space lowered."""
    unbounded = CalibrationSources(sweep)  # what calibration would be without regard to the free space
    made: list[PlannedPoint] = []

    def seen(points: Iterable[PlannedPoint]) -> Iterator[PlannedPoint]:
        for pp in points:
            unbounded.add(pp)
            yield pp

    def kept(points: Iterable[PlannedPoint]) -> Iterator[PlannedPoint]:
        for pp in points:
            made.extend([pp] if pp.point.role == "calibration" else [])
            yield pp

    yield from fit_added(kept(with_auxiliary(sweep, seen(measured), capacity.free_bytes)), sweep, capacity,
                         time_limit, notes)
    notes += lowered_lines(unbounded.points(0), made, sweep, capacity)


def fit_added(points: Iterable[PlannedPoint], sweep: SweepFile, capacity: Capacity, time_limit: TimeLimit,
              left_out: list[str]) -> Iterator[PlannedPoint]:
    """`points` streamed through, less the added points that would not fit (a line each into `left_out`)."""
    for pp in points:
        why = None if pp.excluded or pp.point.role == "measure" else misfit(pp, sweep, capacity, time_limit)
        if why is None:
            yield pp
        else:
            left_out.append(f"{describe(pp.point)} left out: {why}; the measured points run")


def lowered_lines(wanted: Sequence[PlannedPoint], fitted: Sequence[PlannedPoint], sweep: SweepFile,
                  capacity: Capacity) -> list[str]:
    """Per shape whose calibration scales the free space changed (`wanted`: the added points without regard to
    it, `fitted`: with it), one line: the scales it would run and the space they need, the free space, and what
    it runs instead."""
    def scales(points: Sequence[PlannedPoint]) -> dict[str, tuple[str, list[float], int]]:
        out: dict[str, tuple[str, list[float], int]] = {}
        for pp in points:
            if pp.point.role == "calibration":
                shape = shape_of(pp.point)
                fs, have, need = out.get(shape.key, (shape.filesystem, [], 0))
                out[shape.key] = (fs, [*have, pp.point.checkpoint.scale],
                                  max(need, _sized(pp, sweep).disk_bytes_required))
        return {k: (fs, sorted(set(v)), need) for k, (fs, v, need) in out.items()}

    before, after = scales(wanted), scales(fitted)
    lines = []
    for key, (fs, old, need) in sorted(before.items()):
        new = after.get(key, (fs, [], 0))[1]
        if new == old:
            continue
        free = capacity.free_bytes.get(fs)
        instead = f"runs at scale {', '.join(f'{s:g}' for s in new)} instead" if new else "gets none"
        lines.append(f"calibration of shape {key}: scale {', '.join(f'{s:g}' for s in old)} would need up to "
                     f"{format_bytes(need)} free on filesystem {fs} (its peak + checkpoint.free_space_margin), "
                     f"{format_bytes(free)} free at {capacity.free_where.get(fs, '?')}; it {instead}; the measured "
                     "points run")
    return lines
