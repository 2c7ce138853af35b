"""What `plan` says about projections to full size, per resource shape and fit group: the fit an earlier run of the
same study gives (predicted full-size time with its band, and the scale it rests on), else what calibration will
measure.

Reads the study's `tables/checkpoints.parquet` from an earlier `collect`; only then is the analysis stack loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from studyctl.definition.planning.calibration import ShapeCalibration
from studyctl.definition.planning.fit_group import STUDYCTL_TOOL, FitGroup

if TYPE_CHECKING:
    from studyctl.analysis.projection.fit import Fit
    from studyctl.analysis.projection.table import FitKey


def projection_lines(shapes: list[ShapeCalibration], checkpoints_table: Path | None) -> list[str]:
    fits = _earlier_fits(checkpoints_table)
    lines = []
    for s in shapes:
        found = sorted(((k, f) for k, f in fits.items() if k[0] == s.shape and _serves(k[2:], s.group)),
                       key=lambda kf: str(kf[0][1:]))
        where = s.shape + (f", {s.group.label}" if s.group is not None and s.group.label else "")
        if found:
            for key, f in found:
                p = f.predict(s.files_per_rank, s.full_bytes_per_rank)
                flag = " (flagged: far beyond what was measured)" if p.beyond_reach else ""
                strategy = "" if key[3] in ("sync", None) else f", {key[3]}"
                lines.append(f"{s.shape} {key[1]}{strategy}: {s.source} at full size ~{p.seconds:.1f} s "
                             f"[{p.low_s:.3g}, {p.high_s:.3g}] (95%), from an earlier run: {p.basis}{flag}")
        elif s.scales:
            plural = "s" if len(s.scales) > 1 else ""
            lines.append(f"{where}: measured up to scale {s.measured_scale:g}; calibration adds {s.points} "
                         f"point{'s' if s.points != 1 else ''} of {s.source} at scale{plural} "
                         f"{', '.join(f'{x:g}' for x in s.scales)} to fit from")
        else:
            lines.append(f"{where}: measured up to scale {s.measured_scale:g}; no calibration points: {s.why_none}")
    return lines


def _serves(values: tuple[object, ...], group: FitGroup | None) -> bool:
    """An earlier fit (its FIT_KEYS values) is this group's; without a group, any of studyctl's runs'."""
    return values[0] in (STUDYCTL_TOOL, None) if group is None else tuple(values) == tuple(group)


def _earlier_fits(path: Path | None) -> dict[FitKey, Fit]:
    if path is None or not path.is_file():
        return {}
    import pandas as pd

    from studyctl.analysis.projection.table import fit_all

    return fit_all(pd.read_parquet(path))
