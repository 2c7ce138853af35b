"""The plan's view of a restart onto another layout: per restart layout, files opened and bytes read per rank
(max, mean) and in total, beside a restore of the same checkpoint in the shape that wrote it.

Both sides are `reshard_summary` in the point's restore mode (a same-shape "reshard" reads exactly what restore
`full`, `rank` or `broadcast` reads today), so the two columns are computed one way and compare like for like.
Bytes are as written (the point's `scale`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from typing import Any

from studyctl.definition.checkpoint.layout import Naming, Parallelism
from studyctl.definition.checkpoint.points import RestoreMode
from studyctl.definition.checkpoint.reshard_counts import ReshardSummary, reshard_summary
from studyctl.definition.inputs.catalog import ModelSpec

SIDES = ("restart", "same_shape")  # the key prefix of each side of a restart's columns
RESTART_KEYS = ("restart_layout", *(f"{side}_{f.name}" for side in SIDES for f in fields(ReshardSummary)))


@dataclass(frozen=True, slots=True)
class RestartColumns:
    """A plan row's restart onto another layout: what it opens and reads, beside a same-shape restore."""

    layout: str  # TP×PP×DP
    restart: ReshardSummary
    same_shape: ReshardSummary

    def json(self) -> dict[str, Any]:
        """The columns as the plan writes them (RESTART_KEYS)."""
        row: dict[str, Any] = {"restart_layout": self.layout}
        for side in SIDES:
            row.update({f"{side}_{k}": v for k, v in asdict(getattr(self, side)).items()})
        return row


def layout_label(par: Parallelism) -> str:
    """TP×PP×DP, as the plan's table writes a layout."""
    return f"{par.tensor}×{par.pipeline}×{par.data}"


@lru_cache(maxsize=1024)
def restart_columns(model: ModelSpec, old: Parallelism, new: Parallelism, scale: float = 1.0,
                    naming: Naming = "dlio", restore: RestoreMode = "full") -> RestartColumns:
    """The plan row's restart columns for a checkpoint written with `old`, restored onto `new`.
    Raises reshard's ReshardError (a ValueError) with the reason when the restart is impossible."""
    return RestartColumns(layout_label(new), reshard_summary(model, old, new, scale, naming, restore),
                          reshard_summary(model, old, old, scale, naming, restore))


def restart_fields(model: ModelSpec, old: Parallelism, new: Parallelism, scale: float = 1.0,
                   naming: Naming = "dlio", restore: RestoreMode = "full") -> dict[str, Any]:
    """`restart_columns` as the plan writes them (RESTART_KEYS)."""
    return restart_columns(model, old, new, scale, naming, restore).json()
