"""Plausibility of a schema-valid result: figures that cannot be true make the file unusable.

Two layers, both over every section a result carries:
- by unit: the schema tags every number with a `result_fields.Unit`; each number is held to its unit's physical
  bound (`BOUNDS`), derived from the models' own fields, recursively, so a new section or field is covered by
  construction. A file is read through `bounded_validator`: the result schema with those bounds added, checked
  while the JSON is parsed (at no cost a Python walk would have); only a file it refuses is walked
  (`implausible`) to name the first number out of bounds. A numeric field without a unit is a schema error,
  raised when this module loads.
- by plan (`plausibility_plan`): where the point's layout and plan fix a value (bytes a restore reads, the
  restart's world, a ceiling's probe size), the result must agree; where they bound one (request counts, files),
  it must stay within.
The first problem found is one line naming the field by its path (e.g. `recovery.bytes_read`). The worker checks
a reused ceiling with the same rules (worker.ceiling_shared); collect, compare and the MLPerf view through
`attempt.result_file`.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, Union

from pydantic import BaseModel
from pydantic_core import SchemaValidator

from studyctl.definition.result.plausibility_plan import plan_problems
from studyctl.definition.result.result_fields import Unit
from studyctl.definition.result.result_schema import Result
from studyctl.units import GIB, MIB

# 1 PiB/s: far above any storage system (or memory-backed filesystem) a checkpoint study can reach.
MAX_GIBPS = 1024.0 * 1024.0
MAX_BYTES = 1 << 60  # 1 EiB: more than any filesystem built holds, let alone one checkpoint
MAX_SECONDS = 30 * 86400.0  # 30 days: longer than any job a study runs (Slurm sites cap jobs at days)
MAX_RANKS = 1 << 24  # 16 Mi ranks: above the largest machine's cores
MAX_COUNT = MAX_BYTES // MIB  # files, requests, steps: one per MiB of the largest byte count
MAX_RATIO = 1e6  # a step a million times slower than idle (or a CPU share of a million cores) is a broken clock

# Per unit: (lowest, highest) a true figure can be, and what the highest means.
BOUNDS: dict[str, tuple[float, float, str]] = {
    "s": (0.0, MAX_SECONDS, "30 days"),
    "±s": (-MAX_SECONDS, MAX_SECONDS, "30 days"),
    "GiB/s": (0.0, MAX_GIBPS, "1 PiB/s"),
    "GiB": (0.0, MAX_BYTES / GIB, "1 EiB"),
    "B": (0.0, MAX_BYTES, "1 EiB"),
    "count": (0.0, MAX_COUNT, "one per MiB of 1 EiB"),
    "ranks": (0.0, MAX_RANKS, "more ranks than any machine runs"),
    "fraction": (0.0, 1.0, "the whole"),
    "ratio": (-1.0, MAX_RATIO, "a million times"),
}


@dataclass(frozen=True)
class NumericField:
    pattern: str  # the field's path, "*" for a list index or a mapping key: "checkpoints.*.ranks.*.bytes"
    unit: Unit


def _unit(annotation: Any, metadata: list[Any]) -> Unit | None:
    for m in metadata:
        if isinstance(m, Unit):
            return m
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unit(typing.get_args(annotation)[0], list(annotation.__metadata__))
    if origin in (Union, types.UnionType):  # X | None
        units = [u for a in typing.get_args(annotation) if (u := _unit(a, [])) is not None]
        return units[0] if len(units) == 1 else None
    return None


def _strip(annotation: Any) -> Any:
    """The type inside Annotated[...] and Optional[...]."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _numeric(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, (int, float)) and not issubclass(t, bool)


# Sections that are not measurements: the point is the plan itself (its own model validates it, its id is its hash).
NOT_FIGURES = frozenset({"point"})


def _fields(model: type[BaseModel]) -> Iterator[tuple[str, Any, Unit | None]]:
    for name, info in model.model_fields.items():
        if issubclass(model, Result) and name in NOT_FIGURES:
            continue
        yield name, info.annotation, _unit(info.annotation, info.metadata)


def numeric_fields(model: type[BaseModel] = Result, prefix: str = "") -> list[NumericField]:
    """Every numeric field of `model`'s sections, from its annotations; raises TypeError for one without a Unit."""
    out: list[NumericField] = []
    for name, annotation, unit in _fields(model):
        out += _collect(f"{prefix}{name}", annotation, unit)
    return out


def _collect(path: str, annotation: Any, unit: Unit | None) -> list[NumericField]:
    t = _strip(annotation)
    origin = typing.get_origin(t)
    if origin in (list, dict):
        inner = typing.get_args(t)[-1]
        return _collect(f"{path}.*", inner, unit or _unit(inner, []))
    if isinstance(t, type) and issubclass(t, BaseModel):
        return numeric_fields(t, f"{path}.")
    if _numeric(t):
        if unit is None or unit.name not in BOUNDS:
            raise TypeError(f"result field {path} is a number without a known unit (result_fields.Unit): "
                            "its plausibility bound comes from its unit")
        return [NumericField(path, unit)]
    return []


CHECKED = numeric_fields()  # at import: a numeric field without a unit fails here, not in a user's collect


@dataclass(frozen=True)
class _Slot:
    """How to walk one field of a model: a number, a model, or a list / mapping of either."""

    name: str
    many: int  # how many lists / mappings hold it (0: the field is the number or model itself)
    unit: Unit | None  # a number's (None: a model)
    low: float = 0.0
    high: float = 0.0


@cache
def _slots(model: type[BaseModel]) -> tuple[_Slot, ...]:
    """`model`'s fields that hold numbers, directly or below (derived from the same annotations as CHECKED)."""
    out = []
    for name, annotation, unit in _fields(model):
        t, many = _strip(annotation), 0
        while typing.get_origin(t) in (list, dict):
            inner = typing.get_args(t)[-1]
            t, unit, many = _strip(inner), unit or _unit(inner, []), many + 1
        if isinstance(t, type) and issubclass(t, BaseModel):
            out.append(_Slot(name, many, None))
        elif _numeric(t):
            if unit is None or unit.name not in BOUNDS:
                raise TypeError(f"result field {name} of {model.__name__} is a number without a known unit")
            out.append(_Slot(name, many, unit, *BOUNDS[unit.name][:2]))
    return tuple(out)


def _walk(obj: BaseModel, prefix: str) -> str | None:
    """The first number in `obj` outside its unit's bounds, walked by its own class's fields (a model's subclass
    with a field more is walked with it)."""
    for slot in _slots(type(obj)):
        problem = _value(slot, getattr(obj, slot.name), f"{prefix}{slot.name}", slot.many)
        if problem:
            return problem
    return None


def _value(slot: _Slot, value: Any, path: str, many: int) -> str | None:
    """The first problem in one field's value, `many` containers deep."""
    if value is None:
        return None
    if many:
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            problem = _value(slot, item, f"{path}.{key}", many - 1)
            if problem:
                return problem
        return None
    if slot.unit is None:
        return _walk(value, f"{path}.")
    if slot.low <= value <= slot.high:  # NaN fails both
        return None
    return unit_problem(path, slot.unit, value)


def unit_problem(path: str, unit: Unit, value: float) -> str | None:
    low, high, meaning = BOUNDS[unit.name]
    if isinstance(value, float) and not math.isfinite(value):
        return f"{path} = {value}, not a number"
    if value < low:
        return f"{path} = {value:g} {unit.name}, below {low:g}"
    if value > high:
        return f"{path} = {value:g} {unit.name}, above {high:g} ({meaning})"
    return None


def implausible(r: Result, within_bounds: bool = False) -> str | None:
    """One line naming the first figure that cannot be true, or None: every number against its unit's bound,
    then against what the point's layout and plan fix. `within_bounds`: `r` came from `bounded_validator`, which
    held every number to its bound already (the walk is skipped)."""
    return (None if within_bounds else _walk(r, "")) or next(plan_problems(r), None)


@cache
def bounded_validator() -> SchemaValidator:
    """The result schema's validator with each number's unit bound added (`bounded_schema`): a result it accepts
    has every figure within bounds, checked in pydantic-core as the file is parsed. Its results are `Result`
    instances, as `Result.model_validate_json` makes them."""
    schema, models = bounded_schema()
    # pydantic-core reuses a complete model class's own validator for its node (the unbounded one): each bounded
    # class is marked incomplete while this one is built from the bounded nodes, and restored at once.
    flags = {cls: cls.__dict__["__pydantic_complete__"] for cls in models if "__pydantic_complete__" in cls.__dict__}
    try:
        for cls in flags:
            cls.__pydantic_complete__ = False
        return SchemaValidator(schema)
    finally:
        for cls, flag in flags.items():
            cls.__pydantic_complete__ = flag


def bounded_schema() -> tuple[Any, set[type[BaseModel]]]:
    """Result's core schema with `BOUNDS` added to every number of its sections, by the same slots the walk
    takes; and the model classes whose nodes it bounded."""
    schema = copy.deepcopy(Result.__pydantic_core_schema__)
    definitions = {d["ref"]: d for d in schema.get("definitions", [])} if schema["type"] == "definitions" else {}
    models: set[type[BaseModel]] = set()
    _bound(schema["schema"] if definitions else schema, None, definitions, models)
    return schema, models


# Keys of a core schema that hold no validation of the value (its serialization, its metadata, a class).
_NOT_VALIDATION = frozenset({"serialization", "metadata", "cls", "ref", "config", "json_schema_extra"})


def _bound(node: Any, bound: tuple[float, float] | None, definitions: dict[str, Any],
           models: set[type[BaseModel]]) -> None:
    """Add `bound` (low, high) to every int and float schema under `node`; a model's fields take their own
    slots' bounds (a field that holds no number, and the result's point, are left as they are); `models`
    gathers the classes of the model nodes bounded."""
    if isinstance(node, list | tuple):
        for item in node:
            _bound(item, bound, definitions, models)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "definition-ref":
        target = definitions.pop(node["schema_ref"], None)  # bounded once, where first referred to
        if target is not None:
            _bound(target, bound, definitions, models)
    elif kind == "model":
        models.add(node["cls"])
        slots = {s.name: s for s in _slots(node["cls"])}
        for name, field in _model_fields(node)["fields"].items():
            if name in slots:
                slot = slots[name]
                _bound(field["schema"], None if slot.unit is None else (slot.low, slot.high), definitions, models)
    elif kind in ("int", "float") and bound is not None:
        _constrain(node, *bound)
    else:
        for key, value in node.items():
            if key not in _NOT_VALIDATION:
                _bound(value, bound, definitions, models)


def _model_fields(model: dict[str, Any]) -> dict[str, Any]:
    """A model schema's fields, under the validators that wrap them."""
    node = model["schema"]
    while node["type"] != "model-fields":
        node = node["schema"]
    return node


def _constrain(node: dict[str, Any], low: float, high: float) -> None:
    """`low <= value <= high` on one number's schema, keeping a stricter constraint the schema has (`gt=0`)."""
    whole = node["type"] == "int"
    if node.get("ge", -math.inf) < low and node.get("gt", -math.inf) < low:
        node["ge"] = math.ceil(low) if whole else low
    if node.get("le", math.inf) > high and node.get("lt", math.inf) > high:
        node["le"] = math.floor(high) if whole else high
    if not whole:
        node["allow_inf_nan"] = False
