"""Time to the first training step after a failure, per recovery scenario: the `recovery.table` table (one
row per point that restarted) and its cells, each phase's mean over repetitions with a 95% CI, beside the cell's
own same-shape restore (its restore mode's, measured in the writing world), with flags.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from studyctl.analysis.adequacy import MAX_RELATIVE_CI, MIN_REPETITIONS
from studyctl.analysis.cell_ci import ci_columns
from studyctl.analysis.cells import SETTINGS
from studyctl.analysis.recovery.rows import LAYOUT, PHASES

FIGURES = (*PHASES, "same_shape_restore_s", "bytes_per_rank_max", "bytes_per_rank_mean", "files_opened",
           "files_per_rank_max")
FIRST = ("scenario", *LAYOUT, "launcher", "step_s", "bytes_read")
ONE_CLOCK = "one clock (simulated nodes: launcher and ranks share a machine)"
NODE_CLOCKS = "launch read on the nodes' clocks (includes their sync error)"


def recovery_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per point that restarted (`recovery.rows.recovery_row`)."""
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame.from_records(rows).sort_values("point_id", kind="stable", ignore_index=True)


def recovery_flags(row: dict[str, Any]) -> list[str]:
    """What makes a cell's time to first step hard to act on."""
    flags = [ONE_CLOCK if row.get("shared_clock") else NODE_CLOCKS]
    if row.get("simulated_nodes"):
        flags.append("simulated nodes (one host)")
    if int(row.get("n", 0)) < MIN_REPETITIONS:
        flags.append(f"fewer than {MIN_REPETITIONS} repetitions")
    mean, half = row.get("time_to_first_step_s"), row.get("time_to_first_step_s_ci95")
    if mean and half == half and half is not None and half / mean > MAX_RELATIVE_CI:
        flags.append(f"CI over ±{MAX_RELATIVE_CI:.0%}")
    return flags


def recovery_cells(table: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: settings, scenario and layouts, n, every figure's mean and 95% CI, flags."""
    if table.empty:
        return pd.DataFrame()
    grouped = table.groupby("cell_key", sort=True, dropna=False)
    first = [c for c in dict.fromkeys([*SETTINGS, "tool", "io_mode_used", "cold_read_method", *FIRST]) if c in table]
    cells = grouped[first].first().join(grouped.size().rename("n"))
    cells = cells.join(ci_columns(grouped, [f for f in FIGURES if f in table]))
    cells["shared_clock"] = grouped["shared_clock"].all()
    cells["simulated_nodes"] = grouped["simulated_nodes"].any()
    cells = cells.reset_index()
    cells["flags"] = ["; ".join(recovery_flags(r)) for r in cells.to_dict("records")]
    return cells
