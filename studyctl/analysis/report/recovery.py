"""The report's "Time to the first training step after a failure" section: one row per recovery cell (95% CIs,
flags), the restart's layout against the written one, and the cell's own same-shape restore beside it."""

from __future__ import annotations

from typing import Any

from studyctl.analysis.recovery.plots import recovery_axes
from studyctl.analysis.tables import Tables


def _layout(r: dict[str, Any], side: str) -> str:
    return (f"{int(r[f'{side}_world_size'])} ranks: TP{int(r[f'{side}_tensor_parallel'])}"
            f"×PP{int(r[f'{side}_pipeline_parallel'])}×DP{int(r[f'{side}_data_parallel'])}")


def recovery_section(tables: Tables) -> dict[str, Any]:
    """{"axes", "rows", "notes"}; empty rows when no point restarted."""
    cells = tables.recovery_cells
    if cells.empty:
        return {"axes": [], "rows": [], "notes": []}
    axes = recovery_axes(cells)
    rows = [{**r, "written": _layout(r, "old"), "restarted": _layout(r, "new")}
            for r in cells.sort_values(axes, key=lambda c: c.astype(str)).to_dict("records")]
    notes = ["launch: from just before the launcher (mpiexec, or a new srun job step in the same allocation) is "
             "invoked until every rank has passed MPI init; restore: the first rank's start to the last rank's end "
             "of the reads (and broadcasts); ready: a barrier and one simulated training step; setup: the rest of "
             "the wall time between them that a restart does too (reading the task and the written result, mapping "
             "nodes, allocating buffers, building the step); time to first step = their sum, from the launch to "
             "the first completed step. Left out, and shown apart: the cold-read preparation before the restore "
             "(page eviction), which the study adds and a real restart does not. Results from before setup was "
             "recorded show 0 there. Bytes per rank: what each new rank restored (read, or received by broadcast).",
             "same-shape restore: the mean restore of the writing world itself (the point's restore mode, no "
             "relaunch), for comparison."]
    return {"axes": axes, "rows": rows, "notes": notes}
