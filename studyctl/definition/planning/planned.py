"""A planned point: a point, its place in run order, and why it does not run (if it does not).

Its own module so that the modules adding auxiliary points to an expansion (calibration, ceilings) can make
them without importing the expansion that calls them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from studyctl.definition.checkpoint.points import Point


class ExclusionKind(str, Enum):
    """Why a point does not run: the sweep's own exclude rule, or a layout that cannot exist."""

    RULE = "rule"
    INFEASIBLE = "infeasible"


@dataclass(frozen=True)
class Exclusion:
    kind: ExclusionKind
    reason: str

    @property
    def infeasible(self) -> bool:
        return self.kind is ExclusionKind.INFEASIBLE

    def describe(self) -> str:
        """One line for tables and the ledger: infeasible layouts say so first."""
        return f"infeasible: {self.reason}" if self.infeasible else self.reason


@dataclass(frozen=True)
class PlannedPoint:
    point: Point
    order: int  # position in run order
    exclusion: Exclusion | None = None

    @property
    def excluded(self) -> bool:
        return self.exclusion is not None

    @property
    def exclude_reason(self) -> str | None:
        return self.exclusion.describe() if self.exclusion else None
