"""Sweep → points: deterministic expansion, zips, exclusions, infeasible layouts flagged."""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from studyctl.definition.checkpoint.engines import engine_io_problems
from studyctl.definition.checkpoint.objects import object_point_problems, store_limit_problems
from studyctl.definition.checkpoint.points import CHECKPOINT_AXES, CheckpointOptions, Point
from studyctl.definition.checkpoint.recovery import parse_recovery
from studyctl.definition.inputs.catalog import ModelSpec
from studyctl.definition.inputs.training import SimulatedStep
from studyctl.definition.inputs.worlds import over_max_ranks
from studyctl.definition.planning.auxiliary import auxiliary_points
from studyctl.definition.planning.planned import Exclusion, ExclusionKind, PlannedPoint
from studyctl.definition.planning.recovery_plan import recovery_fields
from studyctl.definition.planning.strategies import strategy_problems
from studyctl.definition.planning.sweep import CONDITION, POINT_AXES, ZERO_ALIASES, SweepFile
from studyctl.errors import UserError

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
       "!=": operator.ne}


def _axis_units(sweep: SweepFile) -> tuple[list[list[dict[str, Any]]], list[str]]:
    """Units to cross (each a list of axis-value dicts) and the filesystems to interleave."""
    zipped = {axis for group in sweep.zip for axis in group}
    tiers = sweep.tier_filesystems()
    defaults = {
        "model": list(sweep.model_specs()),
        "filesystem": [fs for fs in sweep.filesystems if fs not in tiers] or list(sweep.filesystems),
    }
    units: list[list[dict[str, Any]]] = []
    filesystems: list[str] = []
    for axis in POINT_AXES + CHECKPOINT_AXES:
        if axis in zipped:
            continue
        values = getattr(sweep.matrix, axis)
        if values is None:
            values = defaults.get(axis) or [getattr(sweep.checkpoint, axis)]
        if axis == "filesystem":
            filesystems = list(values)
            continue
        units.append([{axis: v} for v in values])
    for group in sweep.zip:
        keys = list(group)
        units.append([dict(zip(keys, values, strict=True)) for values in zip(*group.values(), strict=True)])
    return units, filesystems


def _check_point_count(sweep: SweepFile, units: list[list[dict[str, Any]]], filesystems: list[str]) -> None:
    """Refuse a matrix too large to expand, from the axis sizes alone (before any point exists)."""
    count = sweep.repetitions * max(1, len(filesystems)) * math.prod(len(u) for u in units)
    if count > sweep.max_points:
        sizes = " × ".join(str(len(u)) for u in units if len(u) > 1)
        raise UserError(f"{sweep.where}: matrix: expands to {count:,} points ({sizes} × "
                        f"{max(1, len(filesystems))} filesystems × {sweep.repetitions} repetitions), over "
                        f"max_points {sweep.max_points:,}; narrow the axes or raise max_points")


def _normalise(axis: str, value: Any) -> Any:
    if axis == "zero_stage" and isinstance(value, str):
        return ZERO_ALIASES.get(value.lower(), value)
    if axis == "recovery":
        try:
            return parse_recovery(value)
        except ValueError:
            return value
    return value


def _scalar(text: str) -> Any:
    text = text.strip().strip("'\"")
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def value_matches(axis: str, actual: Any, wanted: Any) -> bool:
    """Exclude-rule matching: a value, a list of values, or a condition such as '< 2'."""
    if isinstance(wanted, list):
        return any(value_matches(axis, actual, w) for w in wanted)
    if isinstance(wanted, str):
        cond = CONDITION.match(wanted)
        if cond:
            target = _normalise(axis, _scalar(cond.group(2)))
            try:
                return bool(OPS[cond.group(1)](actual, target))
            except TypeError:
                return False
    return actual == _normalise(axis, wanted)


def _rule_label(i: int, match: dict[str, Any]) -> str:
    parts = [f"{k} {v}" if isinstance(v, str) and CONDITION.match(v) else f"{k}={v}" for k, v in match.items()]
    return f"exclude rule {i + 1} ({', '.join(parts)})"


@lru_cache(maxsize=1024)
def _checkpoint_options(where: str, base: CheckpointOptions, overrides: tuple[tuple[str, Any], ...],
                        step: SimulatedStep, base_set: frozenset[str]) -> CheckpointOptions:
    """`base_set`: the options the sweep set (equal options that differ in it differ in their defaults)."""
    if not overrides:
        return base.for_strategy(step)
    try:
        # only what the sweep set, so for_strategy can tell a default from a choice
        return CheckpointOptions.model_validate({**base.model_dump(exclude_unset=True), **dict(overrides)}
                                                ).for_strategy(step)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        message = str(err["msg"]).removeprefix("Value error, ")
        raise UserError(f"{where}: matrix: checkpoint options {dict(overrides)}: {message}") from None


def iter_points(sweep: SweepFile) -> Iterator[PlannedPoint]:
    """Points in run order: repetition outermost, filesystem innermost, so both interleave."""
    units, filesystems = _axis_units(sweep)
    _check_point_count(sweep, units, filesystems)
    models: dict[str, ModelSpec] = sweep.model_specs()
    given = frozenset(k for k in CHECKPOINT_AXES if getattr(sweep.matrix, k) is not None
                      or any(k in group for group in sweep.zip))
    combos = [_combo(sweep, models, combo, given) for combo in itertools.product(*units)]
    order = 0
    for repetition in range(sweep.repetitions):
        for values, fields, infeasible in combos:
            for fs in filesystems or [str(values["filesystem"])]:
                point = Point.model_construct(**fields, filesystem=fs, repetition=repetition)
                yield _planned(sweep, {**values, "filesystem": fs, "repetition": repetition}, point,
                               infeasible or _object_problems(sweep, point), order)
                order += 1


def _combo(sweep: SweepFile, models: dict[str, ModelSpec], combo: tuple[dict[str, Any], ...], given: frozenset[str]
           ) -> tuple[dict[str, Any], dict[str, Any], Exclusion | None]:
    """What a combination of axis values fixes for all its filesystems and repetitions (`given`: the checkpoint
    axes the matrix or a zip sets, passed on even at their default: a choice, not a default)."""
    values: dict[str, Any] = {}
    for part in combo:
        values.update(part)
    overrides = tuple((k, values[k]) for k in CHECKPOINT_AXES
                      if k in given or values.get(k) != getattr(sweep.checkpoint, k))
    fields = {
        "model": models[values["model"]],
        "zero_stage": values["zero_stage"],
        "tensor_parallel": values["tensor_parallel"],
        "pipeline_parallel": values["pipeline_parallel"],
        "nodes": values["nodes"],
        "ranks_per_node": values["ranks_per_node"],
        "io_mode": values["io_mode"],
        "checkpoint": _checkpoint_options(sweep.where, sweep.checkpoint, overrides, sweep.training.simulated_step,
                                          frozenset(sweep.checkpoint.model_fields_set)),
    }
    _check_world(sweep, values["nodes"], values["ranks_per_node"])
    _check_replaced_nodes(sweep, fields["checkpoint"], values["nodes"])
    problems = _problems(fields["model"], values["nodes"] * values["ranks_per_node"], values["tensor_parallel"],
                         values["pipeline_parallel"], values["zero_stage"], fields["checkpoint"].subset_world_size)
    if not problems:
        problems = _strategy_problems(fields, sweep)
    fields["recovery"], restart_problems = recovery_fields(values.get("recovery"), fields, sweep.training,
                                                           checked=not problems)
    problems = (*problems, *restart_problems, *engine_io_problems(values["io_mode"], fields["checkpoint"]))
    infeasible = Exclusion(ExclusionKind.INFEASIBLE, "; ".join(problems)) if problems else None
    return values, fields, infeasible


def _check_world(sweep: SweepFile, nodes: int, ranks_per_node: int) -> None:
    """Each axis is bounded where the sweep is read; their product, the point's world, is bounded here."""
    problem = over_max_ranks(nodes * ranks_per_node)
    if problem:
        raise UserError(f"{sweep.where}: matrix: nodes × ranks_per_node = {nodes:,} × {ranks_per_node:,} ranks: "
                        f"{problem}")


def _check_replaced_nodes(sweep: SweepFile, opts: CheckpointOptions, nodes: int) -> None:
    """A tiered point replaces (wipes the tier of) at most every one of its nodes."""
    if opts.strategy == "tiered" and opts.replaced_nodes > nodes:
        zipped = [f"zip.{i}.replaced_nodes" for i, group in enumerate(sweep.zip) if "replaced_nodes" in group]
        key = ("matrix.replaced_nodes" if sweep.matrix.replaced_nodes is not None
               else zipped[0] if zipped else "checkpoint.replaced_nodes")
        raise UserError(f"{sweep.where}: {key}: {opts.replaced_nodes} is more than the point's nodes {nodes}; "
                        f"allowed 0 to {nodes} (0: a no-failure restore; {nodes}: every node restores from "
                        "shared storage)")


def _planned(sweep: SweepFile, values: dict[str, Any], point: Point, infeasible: Exclusion | None,
             order: int) -> PlannedPoint:
    """A sweep rule wins over infeasibility: the user already said why the point is out."""
    for i, rule in enumerate(sweep.exclude):
        if all(value_matches(axis, values.get(axis), wanted) for axis, wanted in rule.match.items()):
            return PlannedPoint(point, order, Exclusion(ExclusionKind.RULE, rule.reason or _rule_label(i, rule.match)))
    return PlannedPoint(point, order, infeasible)


@lru_cache(maxsize=8192)
def _problems(model: ModelSpec, world: int, tp: int, pp: int, zero: int, subset_of: int | None
              ) -> tuple[str, ...]:
    from studyctl.definition.checkpoint.layout import layout_problems

    return tuple(layout_problems(model, world, tp, pp, zero, subset_of))


def _object_problems(sweep: SweepFile, point: Point) -> Exclusion | None:
    """A point on an object store that asks for what it has not (O_DIRECT, page-cache eviction), or whose objects
    or keys S3 would refuse: infeasible."""
    fs = sweep.filesystems[point.filesystem]
    if fs.object_store is None:
        return None
    problems = (*object_point_problems(point.io_mode, point.checkpoint),
                *store_limit_problems(point, fs.path, fs.object_store, sweep.study))
    if point.recovery is not None:  # the restart world reads files (worker.restart, worker.reshard_read)
        problems = (*problems, f"recovery {point.recovery.label()}: a restart reads files; restarts from an "
                               "object store are not measured yet (recovery none)")
    return Exclusion(ExclusionKind.INFEASIBLE, f"filesystem {point.filesystem} (kind s3): {'; '.join(problems)}") \
        if problems else None


def _strategy_problems(fields: dict[str, Any], sweep: SweepFile) -> tuple[str, ...]:
    opts: CheckpointOptions = fields["checkpoint"]
    if opts.strategy == "sync":
        return ()
    par = Point.model_construct(**fields, filesystem="", repetition=0).parallelism  # the point's own rule
    return tuple(strategy_problems(fields["model"], par, fields["nodes"], fields["ranks_per_node"], opts,
                                   sweep.estimate))


def measure_points(sweep: SweepFile) -> list[PlannedPoint]:
    """The matrix's points in run order (refused where two are the same point)."""
    points = list(iter_points(sweep))
    seen: dict[str, int] = {}
    for p in points:
        if p.point.point_id in seen:  # two axis values that mean the same thing (e.g. 'ddp' and 0)
            raise UserError(f"study {sweep.study}: the matrix yields the same point twice "
                            f"(point {p.point.point_id}); remove the duplicate axis value")
        seen[p.point.point_id] = p.order
    return points


def expand(sweep: SweepFile) -> list[PlannedPoint]:
    """Every point in run order, the ones studyctl adds itself last (submit fits those to where they run:
    `definition.planning.fit_added`)."""
    points = measure_points(sweep)
    return points + auxiliary_points(sweep, points)


