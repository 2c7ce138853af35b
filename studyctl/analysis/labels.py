"""How a point or a cell is named in a line: its settings flat, a label, and the settings that tell points apart.

Light on purpose (pydantic and the point model, no pandas): `sweep status` names points with it, and a status
process loads no analysis stack (`tests/unit/test_light_api.py`). `cells` builds the tables' columns on it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from studyctl.definition.checkpoint.points import Point

NOT_SETTINGS = frozenset({"repetition"})  # repetitions are samples of a cell, not a setting of it
LABEL_KEYS = ("model", "zero_stage", "tensor_parallel", "pipeline_parallel", "nodes", "ranks_per_node", "filesystem",
              "io_mode", "repetition")
LABELLED = (*LABEL_KEYS, "scale")  # what `point_label` names (the scale where it is known)


def _scalar(value: Any) -> Any:
    """A table cell: a catalog model by its name, everything else as it is."""
    if dataclasses.is_dataclass(value) and hasattr(value, "name"):
        return value.name
    return value


def _values(model: BaseModel, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in type(model).model_fields:
        if name in skip:
            continue
        value = getattr(model, name)
        if hasattr(value, "label"):  # an optional setting that is a model (recovery): one column, its label
            out[name] = value.label()
        else:
            out.update(_values(value) if isinstance(value, BaseModel) else {name: _scalar(value)})
    return out


def point_settings(point: Point) -> dict[str, Any]:
    """Every setting of the point except its repetition, flat: {"zero_stage": 1, "block_mib": 16, ...}."""
    return _values(point, NOT_SETTINGS)


def json_value(value: Any) -> Any:
    """A table's value as plain JSON: NaN as None, a numpy scalar as its Python value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def axis_label(axis: str, value: Any) -> str:
    """`io_mode direct`, `block_mib 4`, `tool DLIO, warm reads, no fsync`: one way to name a series."""
    value = json_value(value)
    if axis == "tool":
        from studyctl.analysis.adequacy import tool_label  # only tables have a tool column

        return tool_label(str(value))
    if axis == "zero_stage" and value is not None:
        return f"ZeRO-{value}"
    if axis == "fsync" and value is not None:
        return "fsync" if value else "no fsync"
    return f"{axis} {'–' if value is None else value}"


def describe_cell(row: Any, axes: list[str]) -> str:
    """The axes' values of one row, e.g. "io_mode direct, rank_shift 4"."""
    get = row.get if isinstance(row, dict) else row.__getitem__
    return ", ".join(axis_label(a, get(a)) for a in axes) or "all points"


def point_label(v: Mapping[str, Any]) -> str:
    """One point in a line (coverage, status): `gpt2-125m ZeRO-1 TP1×PP1 2×1 scratch buffered rep 0[ scale 0.01]`."""
    text = (f"{v['model']} ZeRO-{v['zero_stage']} TP{v['tensor_parallel']}×PP{v['pipeline_parallel']} "
            f"{v['nodes']}×{v['ranks_per_node']} {v['filesystem']} {v['io_mode']} rep {v['repetition']}")
    return text + (f" scale {v['scale']}" if v.get("scale") else "")


Columns = Mapping[str, Sequence[Any]]  # a table as its columns' values, row by row


def varying_keys(columns: Columns, keys: Sequence[str]) -> list[str]:
    """`keys` whose column holds more than one value (missing counts as a value; values compared by their text,
    so 1, 1.0 and True differ)."""
    return [k for k in keys if len(set(map(str, columns[k]))) > 1]


def independent_keys(columns: Columns, axes: list[str]) -> list[str]:
    """`axes` minus those the others determine (what ran, where it always follows what was asked; a zipped axis
    that moves with another), the last ones dropped first."""
    keep = list(axes)
    text = {a: [str(v) for v in columns[a]] for a in axes}  # each value as shown: distinct rows as sets of tuples

    def distinct(names: list[str]) -> int:
        return len(set(zip(*(text[c] for c in names), strict=True)))

    for axis in reversed(axes):
        rest = [a for a in keep if a != axis]
        if rest and distinct(rest) == distinct([*rest, axis]):
            keep = rest
    return keep


def telling(columns: Columns, keys: Sequence[str], shown: Sequence[str]) -> list[str]:
    """Of `keys`, those that tell the rows apart beyond the `shown` ones (a table's own columns): those that vary,
    less those the others determine (a sync point's absent step settings follow its strategy), in `keys` order.
    Without them, points of two engines or strategies on one shape read the same."""
    axes = varying_keys(columns, keys)
    ordered = [*(a for a in axes if a in shown), *(a for a in axes if a not in shown)]  # the shown ones kept
    return [a for a in independent_keys(columns, ordered) if a not in shown]


def telling_rows(rows: Sequence[Mapping[str, Any]], shown: Sequence[str]) -> list[str]:
    """`telling` of these points' flat settings (`point_settings`, all with the same keys)."""
    if len(rows) < 2:
        return []
    keys = list(rows[0])
    return telling({k: [r.get(k) for r in rows] for k in keys}, keys, shown)


def told_texts(points: Sequence[Point], shown: Sequence[str]) -> list[str]:
    """Per point, the values of the settings that tell it from the others beyond the `shown` ones ("engine dcp,
    strategy async"; "" where nothing else varies)."""
    rows = [point_settings(p) for p in points]
    told = telling_rows(rows, shown)
    return [describe_cell(r, told) if told else "" for r in rows]


def label_with(label: str, settings: Mapping[str, Any], told: list[str]) -> str:
    """`label`, then the `told` settings' values ("…, engine dcp, strategy async")."""
    return f"{label}, {describe_cell(dict(settings), told)}" if told else label


def point_labels(points: Sequence[Point]) -> list[str]:
    """Each point in a line (`point_label`), with the settings that tell it from the others where they vary."""
    rows = [point_settings(p) for p in points]
    told = telling_rows(rows, LABELLED)
    return [label_with(point_label({**r, "repetition": p.repetition}), r, told) for p, r in zip(points, rows,
                                                                                                strict=True)]
