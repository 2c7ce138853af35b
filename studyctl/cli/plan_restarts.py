"""`studyctl plan`'s restart lines: per restart layout, what a resharded restore opens and reads, beside a
restore in the shape that wrote the checkpoint (the rows' `restart` columns, `definition.checkpoint.restart_plan`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studyctl.cli.common import out
from studyctl.units import format_bytes

if TYPE_CHECKING:
    from studyctl.api import PlanRow, ReshardSummary


def collect_restart(restarts: dict[tuple, PlanRow], row: PlanRow) -> None:
    """Keep the first runnable row of each restart line: the checkpoint written, the restart layout and how it
    restores."""
    if row.restart is not None and not row.excluded:
        restarts.setdefault((row.model, row.zero_stage, row.tensor_parallel, row.pipeline_parallel,
                             row.data_parallel, row.scale, row.restore, row.restart.layout), row)


def _side(side: ReshardSummary) -> str:
    bcast = side.broadcast_bytes
    return (f"per rank {format_bytes(side.bytes_per_rank_max)} max / "
            f"{format_bytes(int(side.bytes_per_rank_mean))} mean, "
            f"{side.files_opened_max} / {side.files_opened_mean:.3g} files opened (max / mean), "
            f"{format_bytes(side.total_bytes)} from storage in total"
            + (f" (+ {format_bytes(bcast)} by broadcast)" if bcast else ""))


def print_restarts(restarts: dict[tuple, PlanRow]) -> None:
    if not restarts:
        return
    out.print("restarts after a failure (each new rank reads only its byte ranges of the old files):")
    for r in restarts.values():
        restart = r.restart
        assert restart is not None  # collect_restart keeps no other
        out.print(f"  {r.model}, ZeRO {r.zero_stage}, {r.tensor_parallel}×{r.pipeline_parallel}×"
                  f"{r.data_parallel} → {restart.layout} (TP×PP×DP, {restart.restart.ranks} ranks), "
                  f"restore {r.restore}:")
        out.print(f"    resharded:  {_side(restart.restart)}")
        out.print(f"    same shape: {_side(restart.same_shape)}")
