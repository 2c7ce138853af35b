"""What a parse cache's values become in its shards: table rows packed (`pack`, `unpack`), whether a value is finite
(orjson would write NaN and ±inf as null), and what a parse worker sends back (`portable`): a value's parts as the
exact bytes the shards take. `Split`: how a value divides into what every collect reads and a bulky part."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, compress, count
from typing import Any

import orjson

TABLE = "__rows__"  # marks packed table rows (no column of ours has this name)


@dataclass(frozen=True)
class Split:
    """How a cached value divides into what every collect reads and a bulky part read only when asked for."""

    parts: Callable[[Any], tuple[Any, Any]]  # value → (its light part, its bulky part or None where it has none)
    join: Callable[[Any, Any], None]  # (light part, bulky part): the light part made whole again, in place


def shared_prefix(rows: Sequence[dict[str, Any]]) -> int:
    """How many leading columns every row has, in the same order and with the same value (and type: 1 is not
    1.0). A row that shares the whole prefix so far is compared at once (its keys, values and types as lists, in
    C: no (key, value) pair built per column); one that differs is searched for where, also in C (a column at a
    time over every row was a tenth of a cold collect, and a walk in Python of each row that differs a third of
    packing one result). A NaN is never the same as itself here: the prefix stops before it, still a prefix."""
    keys, values = list(rows[0]), list(rows[0].values())
    types = list(map(type, values))
    n = len(keys)
    for r in rows[1:]:
        names, got = list(r)[:n], list(r.values())[:n]
        kinds = list(map(type, got))
        if names == keys[:n] and got == values[:n] and kinds == types[:n]:
            continue
        differs = map(any, zip(map(operator.ne, names, keys), map(operator.ne, got, values),
                               map(operator.is_not, kinds, types), strict=True))
        n = next(compress(count(), differs), len(names))
    return n


def pack(value: Any) -> Any:
    """Table rows (lists of dicts) store their leading columns of equal values once: a smaller, quicker cache.

    Dicts, lists and tuples are walked into their dicts only; other values are kept (JSON makes tuples lists).
    """
    if isinstance(value, dict):
        return {k: pack(v) if isinstance(v, (dict, list, tuple)) else v for k, v in value.items()}
    if not isinstance(value, (list, tuple)):
        return value
    if len(value) < 2 or not all(isinstance(v, dict) for v in value):  # a tuple in it becomes the list JSON makes
        return [pack(v) if isinstance(v, dict) else list(v) if isinstance(v, tuple) else v for v in value]
    n = shared_prefix(value)
    common = dict(list(value[0].items())[:n])
    return {TABLE: common, "rows": [dict(list(v.items())[n:]) for v in value]}


def unpack(value: Any) -> Any:
    """The inverse of `pack`: each row is its shared columns, then its own, in their order.

    Fresh from the parser, so dicts are filled in place and lists without a dict are kept: only what holds a
    packed table is walked (one call per value was a third of loading the cache)."""
    kind = type(value)
    if kind is list:
        return [unpack(v) if type(v) is dict else v for v in value] if dict in map(type, value) else value
    if kind is not dict:
        return value
    if TABLE in value:
        common = value[TABLE]
        return [{**common, **rest} for rest in value["rows"]]
    kinds = set(map(type, value.values()))
    if dict in kinds or list in kinds:
        for k, v in value.items():
            if type(v) is dict or type(v) is list:
                value[k] = unpack(v)
    return value


def finite(value: Any) -> bool:
    """Whether no float in `value` is NaN or ±inf (orjson would write those as null). Lists of lists are
    flattened and checked at once (a container at a time was two seconds for 10,000 results). A sum of finite
    floats that overflows answers False too: then json writes the shard, still exactly."""
    stack: list[Any] = [[value]]
    while stack:
        items = stack.pop()
        if sum(x for x in items if type(x) is float) * 0.0 != 0.0:  # NaN or ±inf anywhere makes NaN
            return False
        stack += [x.values() for x in items if type(x) is dict]
        lists = [x for x in items if type(x) is list or type(x) is tuple]
        if lists:
            stack.append(list(chain.from_iterable(lists)))
    return True


Packed = tuple[bytes, bytes | None]  # a value's light part and bulky part, each packed and written by orjson


def _exact_bytes(value: Any) -> bytes | None:
    packed = pack(value)
    try:
        data = orjson.dumps(packed)
    except TypeError:  # numpy scalars, non-string keys, integers beyond 64 bits
        return None
    return data if orjson.loads(data) == packed else None


def portable(value: Any, split: Split | None) -> tuple[Packed | None, Any]:
    """(the value's parts packed and written by orjson, None) where that is exact, else (None, the value). The
    worker packs and checks what the collecting process would (beside the others, on another core); its bytes cross
    back cheaper than the objects and go into the shards as they are. Exact: the bytes read back are the value
    packed (orjson writes NaN and ±inf as null, and refuses what JSON has no type for), compared in C, where a walk
    for floats that are not finite was two fifths of what the worker spent on a file besides parsing it."""
    light, heavy = split.parts(value) if split is not None else (value, None)
    light_bytes = _exact_bytes(light)
    heavy_bytes = _exact_bytes(heavy) if heavy is not None else None
    if light_bytes is None or (heavy is not None and heavy_bytes is None):
        return None, value
    return (light_bytes, heavy_bytes), None


def from_portable(packed: Packed, split: Split | None) -> Any:
    value = unpack(orjson.loads(packed[0]))
    if split is not None and packed[1] is not None:
        split.join(value, unpack(orjson.loads(packed[1])))
    return value
