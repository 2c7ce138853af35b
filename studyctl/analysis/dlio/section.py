"""The report's "Imported DLIO runs" table, declared once: per run and phase, DLIO's own figure beside ours."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from studyctl.analysis.section import Column, Section

DLIO_RUNS = Section("dlio", (
    Column("folder", "folder", "code", align="left"),
    Column("label", "label", "text", align="left"),
    Column("started", "started", "text", align="left"),
    Column("phase", "phase", "text", align="left"),
    Column("checkpoints", "checkpoints"),
    Column("DLIO's rank-0 GiB/s", "dlio_GiBps", "fmt"),
    Column("ours, GiB/s", "ours_GiBps", "fmt"),
))


def run_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per imported run and phase it checkpointed."""
    return [{"folder": run["folder"], "label": run["label"], "started": run["started"], "phase": phase,
             "checkpoints": n, "dlio_GiBps": run["dlio_GiBps"][phase], "ours_GiBps": run["ours_GiBps"][phase]}
            for run in runs for phase, n in run["checkpoints"].items()]
