"""The report's "Engines side by side" section: per shape, each engine's time and bandwidth beside `stream`'s,
its time over stream's with a 95% CI and its framework's share (`analysis.engines`), and the limit named."""

from __future__ import annotations

from typing import Any

import pandas as pd

from studyctl.analysis.engines import BASELINE, ENGINE_AXES, FROM_STREAM, side_by_side
from studyctl.analysis.section import Column, Section
from studyctl.analysis.values import missing

NOTES = (
    f"same shape: every setting equal but the engine's own ({', '.join(ENGINE_AXES)}: the engine and its settings "
    "in the options model)",
    f"time: the slowest rank's, mean over repetitions ± 95% CI; GiB/s: total bytes / total time; × {BASELINE}'s "
    f"time: {BASELINE}'s bandwidth / the engine's on the same shape (their times where both move the same bytes, "
    "per byte where the framework adds its own), 95% CI from the repetitions (log scale, as collect --ratio)",
    f"framework's share: 1 − {BASELINE}'s time / the engine's (the part of its time the storage, given the same "
    f"bytes, does not need); where the shape has no {BASELINE} cell, the engine's time outside its storage calls, "
    "where its results record them",
)

ENGINES = Section("engines", (
    Column("shape", "shape", "text", align="left"),
    Column("engine", "engine_label", "text", align="left"),
    Column("phase", "phase", "text", align="left"),
    Column("n", "n"),
    Column("time (s)", ("duration_s_mean", "duration_s_ci95"), "est"),
    Column("GiB/s", "bytes_over_time_GiBps", "fmt"),
    Column("± 95% CI", "bytes_over_time_GiBps_ci95", "fmt"),
    Column(f"× {BASELINE}'s\ntime", "times_text", "text", strong="both"),
    Column("framework's\nshare", "share_text", "text"),
    Column("limit", "limit", "text", align="left", strong="both"),
    Column("evidence", "limit_evidence", "text", align="left"),
), wide=True)


def _times(r: dict[str, Any]) -> str:
    """"1.79× [1.52, 2.10]"; the baseline itself; or why there is no ratio."""
    if r["engine"] == BASELINE:
        return "1 (baseline)"
    x = r.get("time_over_stream")
    if missing(x):
        return f"– (no {BASELINE} cell on this shape)"
    low, high = r.get("time_over_stream_low"), r.get("time_over_stream_high")
    ci = " (no CI: one repetition)" if missing(low) or missing(high) else f" [{low:.2f}, {high:.2f}]"
    return f"{x:.2f}×{ci}"


def _share(r: dict[str, Any]) -> str:
    """"44% [31%, 55%]", with where it comes from when not from stream; or why it is not known."""
    if r["engine"] == BASELINE:
        return "–"
    x = r.get("framework_share")
    if missing(x):
        return str(r.get("framework_note") or "not known")
    low, high = r.get("framework_share_low"), r.get("framework_share_high")
    ci = "" if missing(low) or missing(high) else f" [{low:.0%}, {high:.0%}]"
    basis = "" if r.get("framework_basis") == FROM_STREAM else f" ({r.get('framework_basis')})"
    return f"{x:.0%}{ci}{basis}"


def engine_section(summary: pd.DataFrame) -> dict[str, Any]:
    """{"rows", "notes"}: one row per cell × phase, grouped by shape; no rows when no engine axis varies."""
    table = side_by_side(summary)
    if table.empty:
        return {"rows": [], "notes": []}
    rows = [{**r, "times_text": _times(r), "share_text": _share(r)} for r in table.to_dict("records")]
    return {"rows": rows, "notes": list(NOTES)}
