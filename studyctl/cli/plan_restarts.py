"""`studyctl plan`'s restart lines: per restart layout, what a resharded restore opens and reads, beside a
restore in the shape that wrote the checkpoint (the rows' RESTART_KEYS, `definition.restart_plan`)."""

from __future__ import annotations

from typing import Any

from studyctl.cli.common import out
from studyctl.units import format_bytes

# What makes two rows one restart line: the checkpoint written, the restart layout and how it restores.
RESTART_LINE_KEYS = ("model", "zero_stage", "tensor_parallel", "pipeline_parallel", "data_parallel", "scale",
                     "restore", "restart_layout")


def collect_restart(restarts: dict[tuple, dict[str, Any]], row: dict[str, Any]) -> None:
    """Keep the first runnable row of each restart line."""
    if row.get("restart_layout") and not row["excluded"]:
        restarts.setdefault(tuple(row[k] for k in RESTART_LINE_KEYS), row)


def _side(row: dict[str, Any], side: str) -> str:
    bcast = row[f"{side}_broadcast_bytes"]
    return (f"per rank {format_bytes(row[f'{side}_bytes_per_rank_max'])} max / "
            f"{format_bytes(int(row[f'{side}_bytes_per_rank_mean']))} mean, "
            f"{row[f'{side}_files_opened_max']} / {row[f'{side}_files_opened_mean']:.3g} files opened (max / mean), "
            f"{format_bytes(row[f'{side}_total_bytes'])} from storage in total"
            + (f" (+ {format_bytes(bcast)} by broadcast)" if bcast else ""))


def print_restarts(restarts: dict[tuple, dict[str, Any]]) -> None:
    if not restarts:
        return
    out.print("restarts after a failure (each new rank reads only its byte ranges of the old files):")
    for r in restarts.values():
        out.print(f"  {r['model']}, ZeRO {r['zero_stage']}, {r['tensor_parallel']}×{r['pipeline_parallel']}×"
                  f"{r['data_parallel']} → {r['restart_layout']} (TP×PP×DP, {r['restart_ranks']} ranks), "
                  f"restore {r['restore']}:")
        out.print(f"    resharded:  {_side(r, 'restart')}")
        out.print(f"    same shape: {_side(r, 'same_shape')}")
