"""The report's "How close to the hardware" section: per cell its share of the shape's measured ceiling, the
limit that binds with its evidence, where each rank's time went, and the ceilings themselves (`hardware.table`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from studyctl.analysis.cells import HEADLINE
from studyctl.analysis.hardware.ceiling_match import count
from studyctl.analysis.hardware.limit_facts import has_ci
from studyctl.analysis.hardware.limits import rules_text
from studyctl.analysis.hardware.table import PARTS, SIMULATED_CEILING, by_shape
from studyctl.analysis.tables import Tables
from studyctl.analysis.values import missing
from studyctl.units import format_bytes

SHAPE_RATES = ("storage_write_GiBps", "storage_read_GiBps", "even_write_GiBps", "even_read_GiBps",
               "network_bcast_GiBps", "memcpy_GiBps_per_rank")


def _shape_rows(ceilings: pd.DataFrame) -> list[dict[str, Any]]:
    """Per shape: each rate (median over its ceiling points) as "1.23 [1.10, 1.31]" from its rounds, or with "(no
    CI)" where fewer than two rounds are recorded; the rounds per probe; the probe's read method."""
    if ceilings.empty:
        return []
    rates = [c for c in SHAPE_RATES if c in ceilings]
    shapes = by_shape(ceilings)
    grouped = ceilings.groupby("shape", sort=True)
    table = grouped.size().rename("points").to_frame()
    table = table.join(grouped[["largest_shard_bytes", "even_bytes", "simulated_nodes"]].first())
    rows = []
    for r in table.reset_index().to_dict("records"):
        got = shapes[str(r["shape"])]
        texts = {f"{rate}_text": interval_text(got.get(rate), got.get(f"{rate}_low"), got.get(f"{rate}_high"))
                 for rate in rates}
        rounds = count(got.get("storage_read_GiBps_rounds"))
        rows.append({**r, **got, **texts, "rounds": rounds or "none recorded",
                     "read_method": got.get("cold_read_method") or "–"})
    return rows


def interval_text(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """"1.23 [1.10, 1.31]", "1.23 (no CI)", or "–"."""
    if missing(value):
        return "–"
    if missing(low) or missing(high) or not has_ci(float(low), float(high)):
        return f"{float(value):.{digits}f} (no CI)"
    return f"{float(value):.{digits}f} [{float(low):.{digits}f}, {float(high):.{digits}f}]"


def share_text(value: Any, low: Any, high: Any) -> str:
    """"91% [70%, 118%]", "91% (no CI)", or "–"."""
    if missing(value):
        return "–"
    if missing(low) or missing(high):
        return f"{float(value):.0%} (no CI)"
    return f"{float(value):.0%} [{float(low):.0%}, {float(high):.0%}]"


def _split_text(r: dict[str, Any], who: str) -> str:
    """"2% / 91% / 5% / 1%": the shares of open, transfer, fsync and close in `who`'s (slowest, mean) time."""
    parts: list[Any] = [r.get(f"{who}_{p}_share") for p in PARTS]
    return "–" if any(missing(p) for p in parts) else " / ".join(f"{float(p):.0%}" for p in parts)


def _bytes_text(r: dict[str, Any]) -> str:
    top: Any = r.get("bytes_per_rank_max")
    mean: Any = r.get("bytes_per_rank_mean")
    if missing(top) or missing(mean):
        return "–"
    return f"{format_bytes(top, 1)} / {format_bytes(mean, 1)} ({float(r['bytes_max_over_mean']):.2f}×)"


def hardware_section(tables: Tables, records: list[dict[str, Any]]) -> dict[str, Any]:
    """rows (the summary's records, in the report's order), shapes (the measured ceilings), rules, caveat, and
    whether any filesystem states a peak."""
    if all(r.get("limit") == "unknown" and missing(r.get("peak_GiBps")) for r in records):
        records = []  # no ceiling and no stated peak anywhere (`ceilings: off`): nothing to be close to
    rows = [{**r, "slowest_split": _split_text(r, "slowest"), "mean_split": _split_text(r, "mean"),
             "bytes_text": _bytes_text(r),
             "GiBps_text": interval_text(r.get(HEADLINE), r.get(f"{HEADLINE}_ci95_low"), r.get(f"{HEADLINE}_ci95_high"),
                                         3),
             "ceiling_text": interval_text(r.get("ceiling_GiBps"), r.get("ceiling_GiBps_low"),
                                           r.get("ceiling_GiBps_high")),
             "ceiling_share_text": share_text(r.get("ceiling_share"), r.get("ceiling_share_low"),
                                              r.get("ceiling_share_high")),
             "even_share_text": share_text(r.get("even_ceiling_share"), r.get("even_ceiling_share_low"),
                                           r.get("even_ceiling_share_high"))}
            for r in records if r.get("limit")]
    if not rows:
        return {"rows": [], "shapes": [], "rules": [], "caveat": None, "peaks": False}
    caveat = SIMULATED_CEILING if any(isinstance(r.get("limit_caveat"), str) for r in rows) else None
    peaks = any(not missing(r.get("peak_GiBps")) for r in rows)
    return {"rows": rows, "shapes": _shape_rows(tables.ceilings), "rules": rules_text(), "caveat": caveat,
            "peaks": peaks}
