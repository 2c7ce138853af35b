"""What a cell is: every setting of a point except its repetition, plus what actually ran.

Derived from the point model (`studyctl.definition.checkpoint.points.Point`, nested option models flattened), so a
setting added there is a cell axis here with no list to update. Statistics pool repetitions of one
cell only; plots, ratios, compare and the report key on the same columns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import pandas as pd
from pydantic import BaseModel

from studyctl.analysis.labels import NOT_SETTINGS, independent_keys, json_value, telling, varying_keys
from studyctl.definition.checkpoint.points import Point

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


def cell_key(values: dict[str, Any]) -> str:
    """A short stable id of a cell from its identity values (missing settings count as None)."""
    text = json.dumps([json_value(values.get(c)) for c in IDENTITY], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def identity_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in IDENTITY if c in frame.columns]


def varying(frame: pd.DataFrame, exclude: tuple[str, ...] = ()) -> list[str]:
    """Identity columns with more than one value in `frame` (missing counts as a value; values compared by their
    text, so 1, 1.0 and True differ), in IDENTITY order. A set of the column's texts: pandas' astype(str) and
    nunique cost a millisecond a column even for a summary's 30 rows, and collect asks a dozen times."""
    keys = [c for c in identity_columns(frame) if c not in exclude]
    return varying_keys({k: frame[k].tolist() for k in keys}, keys)


def independent(frame: pd.DataFrame, axes: list[str]) -> list[str]:
    """`axes` minus those the others determine (`labels.independent_keys`): a plot gives a channel only to what
    carries information."""
    return independent_keys({a: frame[a].tolist() for a in axes}, axes)


def telling_columns(frame: pd.DataFrame, shown: Sequence[str]) -> list[str]:
    """The identity columns that tell these rows apart beyond the `shown` ones (`labels.telling`)."""
    keys = identity_columns(frame)
    return telling({k: frame[k].tolist() for k in keys}, keys, shown)


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
