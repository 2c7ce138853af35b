"""The report's "How close to the hardware" section: per cell its share of the shape's measured ceiling, the
limit that binds with its evidence, where each rank's time went, and the ceilings themselves (`hardware`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from studyctl.analysis.hardware import PARTS, SIMULATED_CEILING
from studyctl.analysis.limits import (
    FRAMEWORK_SHARE,
    IMBALANCE_CLOSES,
    IMBALANCE_RATIO,
    MEMORY_BOUND,
    METADATA_SHARE,
    NETWORK_BOUND,
    PAGE_CACHE_MARGIN,
    RULES,
    SMALL_FILE_BYTES,
    STORAGE_BOUND,
)
from studyctl.analysis.tables import Tables
from studyctl.analysis.values import missing
from studyctl.units import format_bytes

SHAPE_RATES = ("storage_write_GiBps", "storage_read_GiBps", "even_write_GiBps", "even_read_GiBps",
               "network_bcast_GiBps", "memcpy_GiBps_per_rank")


def rules_text() -> list[str]:
    """How the limit is chosen, with the thresholds in force, in RULES' own order (the first that holds names the
    limit); a rule without a text here fails every report test."""
    text = {
        "page_cache": f"page cache: a buffered write without fsync, or a figure above {PAGE_CACHE_MARGIN:g}× the "
                      "durable/cold ceiling (a warm restore too; never an O_DIRECT read)",
        "framework": f"framework: an engine (torch.save, DCP) whose own work (serialization, copies, planning) takes "
                     f"{FRAMEWORK_SHARE:.0%} or more of its time — 1 − the time of stream on the same shape and "
                     "bytes / the engine's, or where the study has no such stream cell the time outside its "
                     "storage calls — with the share's 95% CI above 0 where there is one; named before storage, "
                     "since the ceiling is a stream probe",
        "storage": f"storage: at least {STORAGE_BOUND:.0%} of the shape's streaming ceiling",
        "tier_and_drain": "tier and drain: a tiered write, durable only once written to the tier, read back and "
                          "written to shared storage",
        "imbalance": f"imbalance: the heaviest rank at {IMBALANCE_RATIO:g}× the mean bytes or more, and even ranks "
                     f"(the bandwidth × max / mean bytes) would close {IMBALANCE_CLOSES:.0%} or more of the gap to "
                     "the even ceiling",
        "metadata": f"metadata: {METADATA_SHARE:.0%} or more of the slowest rank's time in create/open, close and "
                    f"(direct, or files under {format_bytes(SMALL_FILE_BYTES, 0)}) fsync",
        "network": f"network: a broadcast restore whose broadcast runs at {NETWORK_BOUND:.0%} of MPI's broadcast "
                   "ceiling",
        "memory": f"memory: an async snapshot at {MEMORY_BOUND:.0%} of the per-rank memory-copy ceiling",
    }
    return [text[rule.__name__] for rule in RULES] + [
        "otherwise: nothing measured explains the gap (the figures checked are given)"]


def _shape_rows(ceilings: pd.DataFrame) -> list[dict[str, Any]]:
    if ceilings.empty:
        return []
    rates = [c for c in SHAPE_RATES if c in ceilings]
    grouped = ceilings.groupby("shape", sort=True)
    table = grouped[rates].median().join(grouped.size().rename("points"))
    table = table.join(grouped[["largest_shard_bytes", "even_bytes", "simulated_nodes"]].first())
    return table.reset_index().to_dict("records")


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
             "bytes_text": _bytes_text(r)} for r in records if r.get("limit")]
    if not rows:
        return {"rows": [], "shapes": [], "rules": [], "caveat": None, "peaks": False}
    caveat = SIMULATED_CEILING if any(isinstance(r.get("limit_caveat"), str) for r in rows) else None
    peaks = any(not missing(r.get("peak_GiBps")) for r in rows)
    return {"rows": rows, "shapes": _shape_rows(tables.ceilings), "rules": rules_text(), "caveat": caveat,
            "peaks": peaks}
