"""Which runs of one resource shape a projection's fit may pool: those whose settings change the physics of a
phase's time alike. The analysis fits per shape, phase and `FitGroup` (read from the result rows, whose columns
carry these names); calibration runs a ladder of larger scales per shape and `FitGroup` (built from the point),
so every measured cell has calibration runs its fit can use. One definition serves both, so a setting added
here splits the fit and the calibration alike.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from studyctl.definition.checkpoint.objects import OBJECT_COLD_READ
from studyctl.definition.checkpoint.points import Point, cold_read_method

# The tool a studyctl run's rows name (imported results name theirs: DLIO's).
STUDYCTL_TOOL = "studyctl"


class FitGroup(NamedTuple):
    """Its field names are the result columns the analysis keys its fits by."""

    tool: Any
    strategy: Any
    fsync: Any
    cold_read_method: Any

    @property
    def label(self) -> str:
        """What sets the group apart from a plain sync run, for `plan`'s lines ("" where nothing does)."""
        parts = [str(self.strategy)] if self.strategy not in ("sync", None) else []
        parts += ["no fsync"] if self.fsync is False else []
        parts += ["warm reads"] if self.cold_read_method == "none" else []
        return ", ".join(parts)


FIT_KEYS: tuple[str, ...] = FitGroup._fields


def point_fit_group(point: Point, object_store: bool) -> FitGroup:
    """The values the point's result rows will carry in the FIT_KEYS columns (`object_store`: its filesystem is
    one, where a restore has no client cache to avoid)."""
    opts = point.checkpoint
    cold = OBJECT_COLD_READ if object_store else cold_read_method(point.io_mode, opts.cold_read)
    return FitGroup(STUDYCTL_TOOL, opts.strategy, opts.fsync, cold)


def row_fit_group(row: dict[str, Any]) -> FitGroup:
    """The same values, read from a result row (a missing column counts as None)."""
    return FitGroup(*(row.get(k) for k in FIT_KEYS))
