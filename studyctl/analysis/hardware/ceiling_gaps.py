"""Why cells lack a ceiling: the ceiling points that left no result (each by id, state and reason), or, only where
the study has no ceiling point at all, the sweep's `ceilings:` setting that added none."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from studyctl.analysis.status import PointStatus
from studyctl.definition.inputs.yamlpos import load_yaml_bounded
from studyctl.definition.planning.ceilings import AUTO_MAX_SHAPES
from studyctl.errors import UserError

NEED = "shares and limits need them"
MAX_NAMED = 3  # ceiling points named one by one; beyond them, how many more


def ceilings_setting(sweep_copy: Path) -> str | None:
    """The study's `ceilings:` from its copy of the sweep ("auto" when unset); None without a readable copy."""
    try:
        data = load_yaml_bounded(sweep_copy)
    except UserError:
        return None
    value = data.get("ceilings", "auto") if isinstance(data, dict) else "auto"
    return {True: "on", False: "off"}.get(value, str(value)) if isinstance(value, bool) else str(value)


def _named(points: Sequence[PointStatus]) -> str:
    def one(s: PointStatus) -> str:
        why = s.excluded_reason or s.failure_reason
        return f"{s.point_id} {s.state}" + (f" ({why})" if why else "")

    more = f"; {len(points) - MAX_NAMED} more" if len(points) > MAX_NAMED else ""
    return "; ".join(one(s) for s in points[:MAX_NAMED]) + more


def without_result(statuses: Sequence[PointStatus] | None, measured: Collection[str]) -> list[PointStatus]:
    """The study's ceiling points with no ceiling among the results (failed, excluded, not run yet)."""
    return [s for s in statuses or () if s.role == "ceiling" and s.point_id not in measured]


def gap_lines(statuses: Sequence[PointStatus] | None, measured: Collection[str]) -> list[str]:
    """Beside measured ceilings: the ceiling points that left none, so their shapes' cells have no share."""
    gaps = without_result(statuses, measured)
    return [f"{len(gaps)} ceiling point(s) left no ceiling, so their shapes' cells have no share: {_named(gaps)}"
            ] if gaps else []


def no_ceiling_line(statuses: Sequence[PointStatus] | None, setting: str | None) -> str:
    """Why no ceiling was measured at all: what happened to the study's ceiling points, else its setting."""
    gaps = without_result(statuses, ())
    if gaps:
        return f"no ceilings measured: {len(gaps)} ceiling point(s) left none ({_named(gaps)}): {NEED}"
    if setting == "off":
        return f"no ceilings measured: the sweep's `ceilings: off` adds no ceiling point: {NEED}"
    if statuses is None:  # files alone: no point states to say what happened to the ceiling points
        return (f"no ceilings measured: no ceiling point left a result (`ceilings: {setting or '?'}`; the points' "
                f"states were not handed in): {NEED}")
    auto = f", which adds them to a study of at most {AUTO_MAX_SHAPES} resource shapes" if setting == "auto" else ""
    return f"no ceilings measured: the study has no ceiling point (the sweep's `ceilings: {setting}`{auto}): {NEED}"
