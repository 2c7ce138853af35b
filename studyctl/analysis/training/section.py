"""The report's "What checkpoints cost training" table, declared once: per cell the checkpoint's cost, the
intervals, the waste and the goodput, each with its 95% CI and the projection's band at full size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from studyctl.analysis.section import Column, Section, est, fmt, pest, size


def _banded(key: str, digits: int | None = None, share: bool = False) -> Callable[[dict[str, Any]], str]:
    """The figure with its CI, then the projection's band at full size ("" where none)."""
    def text(r: dict[str, Any]) -> str:
        shown = pest(r[key], r[f"{key}_ci95"]) if share else est(r[key], r[f"{key}_ci95"], *(
            () if digits is None else (digits,)))
        return f"{shown}{r['band'][key]}"
    return text


def _interference(r: dict[str, Any]) -> str:
    if r["strategy"] == "sync":
        return "–"
    shown = est(r["interference_s"], r["interference_s_ci95"])
    return f"none measurable ({shown})" if "no measurable interference" in r["flags"] else shown


def _broadcast(r: dict[str, Any]) -> str:
    return size(r["nominal_broadcast_bytes"]) if r["nominal_broadcast_bytes"] else "–"


TRAINING = Section("training", (
    Column("n", "n"),
    Column("blocked (s)", _banded("blocking_s")),
    Column("staged (s)", ("staged_s", "staged_s_ci95"), "est", when="staged"),
    Column("interference (s)", _interference),
    Column("cost C (s)", _banded("checkpoint_cost_s")),
    Column("checkpoint share", _banded("checkpoint_share", share=True)),
    Column("total waste at the interval", _banded("total_waste", share=True), strong="html"),
    Column("Young's interval (s)", _banded("young_interval_s", 0)),
    Column("Daly's interval (s)", _banded("daly_interval_s", 0)),
    Column("total waste at Daly's interval", _banded("total_waste_at_daly", share=True)),
    Column("lost work per failure (s)", _banded("lost_work_per_failure_s", 1)),
    Column("restart R (s)", _banded("restart_s", 1)),
    Column("restore from files (GiB/s, measured)", lambda r: fmt(r["restore_file_GiBps"])),
    Column("by broadcast (nominal)", _broadcast),
    Column("goodput", _banded("goodput", share=True)),
    Column("full size from", "rests_on", "text", align="left"),
    Column("flags", "flags", "text", align="left", css="flags", bad_when="flags"),
), axes=True, wide=True)
