"""What a cell is: every setting of a point except its repetition, plus what actually ran.

Derived from the point model (`studyctl.definition.checkpoint.points.Point`, nested option models flattened), so a
setting added there is a cell axis here with no list to update. Statistics pool repetitions of one
cell only; plots, ratios, compare and the report key on the same columns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
from pydantic import BaseModel

from studyctl.analysis.adequacy import tool_label
from studyctl.definition.checkpoint.points import Point

NOT_SETTINGS = frozenset({"repetition"})  # repetitions are samples of a cell, not a setting of it
# What ran, beside what was asked: a direct point that fell back to buffered is another cell.
MEASURED = ("io_mode_used", "cold_read_method")
# Follow from the settings (world = nodes × ranks per node, ...): shown, never keys of their own.
DERIVED = ("world_size", "data_parallel")
# A cell's headline figure, total bytes / total time over its checkpoints: what every plot, ratio, comparison and
# "best" uses (built by `tables`).
HEADLINE = "bytes_over_time_GiBps"


def _flatten(model: type[BaseModel], skip: frozenset[str] = frozenset()) -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            names += _flatten(kind)
        else:
            names.append(name)
    return names


SETTINGS: tuple[str, ...] = tuple(_flatten(Point, NOT_SETTINGS))
IDENTITY: tuple[str, ...] = ("tool", *SETTINGS, *MEASURED)


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


def _json_value(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def cell_key(values: dict[str, Any]) -> str:
    """A short stable id of a cell from its identity values (missing settings count as None)."""
    text = json.dumps([_json_value(values.get(c)) for c in IDENTITY], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def identity_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in IDENTITY if c in frame.columns]


def varying(frame: pd.DataFrame, exclude: tuple[str, ...] = ()) -> list[str]:
    """Identity columns with more than one value in `frame` (missing counts as a value; values compared by their
    text, so 1, 1.0 and True differ), in IDENTITY order. A set of the column's texts: pandas' astype(str) and
    nunique cost a millisecond a column even for a summary's 30 rows, and collect asks a dozen times."""
    return [c for c in identity_columns(frame) if c not in exclude and len(set(map(str, frame[c].tolist()))) > 1]


def axis_label(axis: str, value: Any) -> str:
    """`io_mode direct`, `block_mib 4`, `tool DLIO, warm reads, no fsync`: one way to name a series."""
    value = _json_value(value)
    if axis == "tool":
        return tool_label(str(value))
    if axis == "zero_stage" and value is not None:
        return f"ZeRO-{value}"
    if axis == "fsync" and value is not None:
        return "fsync" if value else "no fsync"
    return f"{axis} {'–' if value is None else value}"


LABEL_KEYS = ("model", "zero_stage", "tensor_parallel", "pipeline_parallel", "nodes", "ranks_per_node", "filesystem",
              "io_mode", "repetition")
LABELLED = (*LABEL_KEYS, "scale")  # what `point_label` names (the scale where it is known)


def point_label(v: Mapping[str, Any]) -> str:
    """One point in a line (coverage, status): `gpt2-125m ZeRO-1 TP1×PP1 2×1 scratch buffered rep 0[ scale 0.01]`."""
    text = (f"{v['model']} ZeRO-{v['zero_stage']} TP{v['tensor_parallel']}×PP{v['pipeline_parallel']} "
            f"{v['nodes']}×{v['ranks_per_node']} {v['filesystem']} {v['io_mode']} rep {v['repetition']}")
    return text + (f" scale {v['scale']}" if v.get("scale") else "")


def describe_cell(row: Any, axes: list[str]) -> str:
    """The axes' values of one row, e.g. "io_mode direct, rank_shift 4"."""
    get = row.get if isinstance(row, dict) else row.__getitem__
    return ", ".join(axis_label(a, get(a)) for a in axes) or "all points"


def independent(frame: pd.DataFrame, axes: list[str]) -> list[str]:
    """`axes` minus those the others determine (what ran, where it always follows what was asked;
    a zipped axis that moves with another): a plot gives a channel only to what carries information."""
    keep = list(axes)
    text = {a: frame[a].astype(str).tolist() for a in axes}  # each value as shown: distinct rows as sets of tuples

    def distinct(columns: list[str]) -> int:
        return len(set(zip(*(text[c] for c in columns), strict=True)))

    for axis in reversed(axes):
        rest = [a for a in keep if a != axis]
        if rest and distinct(rest) == distinct([*rest, axis]):
            keep = rest
    return keep


def telling_columns(frame: pd.DataFrame, shown: tuple[str, ...]) -> list[str]:
    """The identity columns that tell these rows apart beyond the `shown` ones (a table's own columns): those that
    vary, less those the others determine (a sync point's absent step settings follow its strategy), in IDENTITY
    order. Without them, points of two engines or strategies on one shape read the same."""
    axes = varying(frame)
    return [a for a in independent(frame, [*(a for a in axes if a in shown), *(a for a in axes if a not in shown)])
            if a not in shown]


def telling_settings(points: list[Point], shown: tuple[str, ...]) -> list[str]:
    """`telling_columns` of these points' settings."""
    return telling_columns(pd.DataFrame([point_settings(p) for p in points]), shown) if len(points) > 1 else []


def point_labels(points: list[Point]) -> list[str]:
    """Each point in a line (`point_label`), with the settings that tell it from the others where they vary."""
    telling = telling_settings(points, LABELLED)
    return [label_with(point_label({**point_settings(p), "repetition": p.repetition}), point_settings(p), telling)
            for p in points]


def label_with(label: str, settings: Mapping[str, Any], telling: list[str]) -> str:
    """`label`, then the `telling` settings' values ("…, engine dcp, strategy async")."""
    return f"{label}, {describe_cell(dict(settings), telling)}" if telling else label


def with_fallbacks_shown(frame: pd.DataFrame) -> pd.DataFrame:
    """io_mode as shown: a point that fell back reads "direct → ran buffered", never plain "direct"."""
    if "io_mode_used" not in frame or "io_mode" not in frame:
        return frame
    fell = frame["io_mode_used"].notna() & (frame["io_mode_used"] != frame["io_mode"])
    if not fell.any():
        return frame
    out = frame.copy()
    out.loc[fell, "io_mode"] = out.loc[fell, "io_mode"] + " → ran " + out.loc[fell, "io_mode_used"]
    return out
