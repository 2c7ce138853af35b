"""Engines side by side: each engine's cell beside `stream`'s on the same shape, and the framework's share.

The same shape is every setting equal but the engine's own: `engine` and the settings of the options model's
engine table (`definition.checkpoint.engine_options.ENGINE_SETTINGS`: device, CRC-32, pinned copies, DCP's threads,
stager
and executor), which `stream` never has. `stream` moves the layout's raw bytes at the storage's own cost; an
engine (torch.save, DCP) moves the same tensors through its framework. So on one shape:
  time over stream's = stream's headline / the engine's (total bytes / total time each, `ratios.matched_ratios`,
      95% CI from the repetitions on the log scale): the ratio of their times where both move the same bytes, of
      their times per byte where the framework adds its own (a pickle's or a `.metadata`'s);
  the framework's share = 1 − stream's time / the engine's: the part of the engine's time that the storage, given
      the same bytes, does not need. Without a stream cell on the shape it comes from the engine's own split (the
      time outside its storage calls), where the result records one; else it is not known, and said so.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from studyctl.analysis.cells import DERIVED, HEADLINE, MEASURED, independent, varying
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.ratios import matched_ratios
from studyctl.analysis.values import missing
from studyctl.definition.checkpoint.engine_options import ENGINE_OPTION_DEFAULTS, engine_options

BASELINE = "stream"  # the engine that writes raw bytes: the storage's own cost
ENGINE_AXES: tuple[str, ...] = ("engine", *ENGINE_OPTION_DEFAULTS)  # what differs between engines of one shape
TWIN_COLUMNS = ("stream_GiBps", "time_over_stream", "time_over_stream_low", "time_over_stream_high")
FRAMEWORK_COLUMNS = ("framework_share", "framework_share_low", "framework_share_high", "framework_basis",
                     "framework_note")
# Where a share comes from (`framework_basis`).
FROM_STREAM = "stream on the same shape"
FROM_SPLIT = "outside the engine's storage calls"
PHASE_ORDER = {"write": 0, "read": 1}


def engine_of(row: dict[str, Any]) -> str:
    """A row's engine; `stream` for rows without one (imported DLIO runs, results from before engines)."""
    value = row.get("engine")
    return BASELINE if missing(value) else str(value)


def ours(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows that name an engine: studyctl's cells, not imported runs."""
    return summary[summary["engine"].notna()] if "engine" in summary else summary.iloc[0:0]


def varies_engine(summary: pd.DataFrame) -> bool:
    """The study varies `engine` or an engine setting."""
    cells = ours(summary)
    return not cells.empty and bool(set(varying(cells)) & set(ENGINE_AXES))


def stream_twins(summary: pd.DataFrame) -> pd.DataFrame:
    """Per engine cell × phase that has a stream cell of its shape: (cell_key, phase) and TWIN_COLUMNS."""
    empty = pd.DataFrame(columns=["cell_key", "phase", *TWIN_COLUMNS])
    cells = ours(summary)
    if not (cells["engine"] == BASELINE).any():
        return empty
    m = matched_ratios(cells, "engine", BASELINE, loose=ENGINE_AXES[1:])
    if m.empty:
        return empty
    # the engine's bandwidth over stream's, inverted: its time over stream's (a log-symmetric interval inverts)
    out = pd.DataFrame({"cell_key": m["cell_key"], "phase": m["phase"], "stream_GiBps": m[f"{HEADLINE}_base"],
                        "time_over_stream": 1 / m["ratio"], "time_over_stream_low": 1 / m["ratio_ci95_high"],
                        "time_over_stream_high": 1 / m["ratio_ci95_low"]})
    return out.drop_duplicates(["cell_key", "phase"]).reset_index(drop=True)


def framework_share(engine: str, twin: dict[str, Any], storage_share: float) -> dict[str, Any]:
    """FRAMEWORK_COLUMNS for one engine cell × phase: from its stream twin (`stream_twins`' row, {} without one),
    else from `storage_share` (the share of its time inside storage calls, NaN where not recorded)."""
    none = {"framework_share": math.nan, "framework_share_low": math.nan, "framework_share_high": math.nan,
            "framework_basis": None, "framework_note": None}
    if engine == BASELINE:
        return none
    ratio = twin.get("time_over_stream", math.nan)
    if not missing(ratio) and ratio > 0:
        low, high = twin.get("time_over_stream_low", math.nan), twin.get("time_over_stream_high", math.nan)
        return {**none, "framework_share": 1 - 1 / ratio, "framework_basis": FROM_STREAM,
                "framework_share_low": math.nan if missing(low) else 1 - 1 / low,
                "framework_share_high": math.nan if missing(high) else 1 - 1 / high}
    if not missing(storage_share):
        return {**none, "framework_share": 1 - storage_share, "framework_basis": FROM_SPLIT}
    return {**none, "framework_note": f"no {BASELINE} cell on this shape and no time inside storage calls "
                                      "recorded: the framework's share is not known"}


def engine_label(row: dict[str, Any], axes: list[str]) -> str:
    """`torch_save, crc32 False`: the engine and those of its settings that vary and apply to it (stream has none)."""
    engine = engine_of(row)
    own = engine_options(engine, str(row.get("strategy") or "sync"))  # type: ignore[arg-type]
    return ", ".join([engine, *(describe_cell(row, [a]) for a in axes if a in own)])


def side_by_side(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per cell × phase of a study that varies an engine axis, grouped by shape (stream first): shape and
    engine labels, n, time, bandwidth with its CI, time over stream's with its CI, the framework's share, the limit.
    Empty when no engine axis varies."""
    if not varies_engine(summary):
        return pd.DataFrame()
    summary = ours(summary)
    moving = varying(summary, ("phase", *MEASURED, *DERIVED))
    shape_axes = independent(summary, [a for a in moving if a not in ENGINE_AXES])
    engine_axes = [a for a in moving if a in ENGINE_AXES and a != "engine"]
    records = summary.to_dict("records")
    out = pd.DataFrame({
        "shape": [describe_cell(r, shape_axes) for r in records],
        "engine_label": [engine_label(r, engine_axes) for r in records],
        "is_stream": [r.get("engine") == BASELINE for r in records],
        "_phase": summary["phase"].map(PHASE_ORDER).to_numpy()}, index=summary.index)
    wanted = ["engine", "phase", "n", "duration_s_mean", "duration_s_ci95", HEADLINE, f"{HEADLINE}_ci95",
              *TWIN_COLUMNS, *FRAMEWORK_COLUMNS, "limit", "limit_evidence", "flags"]
    out = out.join(summary[[c for c in wanted if c in summary]])
    order = out.sort_values(["shape", "_phase", "is_stream", "engine_label"], ascending=[True, True, False, True])
    return order.drop(columns="_phase").reset_index(drop=True)
