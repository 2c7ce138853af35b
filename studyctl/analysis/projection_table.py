"""Fits per resource shape from a study's checkpoint rows, and each cell's projected full-size time with its band.

Every run of the study is an observation, calibration points included (`Point.role == "calibration"`: extra
runs at larger scales the study added for this fit); only the cells of measure points get a projection. A run
is one point × phase: its mean span per checkpoint, against the bytes and files each rank that moved bytes
moved. Where no fit exists the cell keeps the plain figure (nominal bytes over its own bandwidth), labelled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from studyctl.analysis.projection import MAX_REACH, Fit, Observation, Projection, fit, plain_projection
from studyctl.analysis.values import missing
from studyctl.definition.fit_group import FIT_KEYS
from studyctl.definition.shapes import Shape

# A fit is per shape (these columns), phase and FIT_KEYS (`definition.fit_group`, which calibration groups by too).
SHAPE_COLUMNS = ("nodes", "ranks_per_node", "filesystem", "io_mode", "block_mib")
PROJECTION_COLUMNS = ("projected_full_size_s", "projected_full_size_s_lo", "projected_full_size_s_hi",
                      "projection_basis", "projection_scale_max", "projection_reach")
FitKey = tuple[Any, ...]


def fit_key(row: dict[str, Any]) -> FitKey:
    shape = Shape(*(row[c] for c in SHAPE_COLUMNS))
    return (shape.key, row.get("phase"), *(row.get(k) for k in FIT_KEYS))


def run_observations(checkpoints: pd.DataFrame) -> dict[FitKey, list[Observation]]:
    """Per fit key, one observation per point × phase (every role)."""
    out: dict[FitKey, list[Observation]] = {}
    if checkpoints.empty:
        return out
    for _, g in checkpoints.groupby(["point_id", "phase"], sort=False):
        first = g.iloc[0].to_dict()
        if missing(first.get("nodes")) or missing(first.get("block_mib")):
            continue  # imported rows (e.g. DLIO's) without a shape
        active = max(1, int(g["active_ranks"].max()))
        out.setdefault(fit_key(first), []).append(Observation(
            files_per_rank=float(g["files"].iloc[0]) / active, bytes_per_rank=float(g["bytes"].iloc[0]) / active,
            seconds=float(g["span_s"].mean()), scale=float(first.get("scale") or 1.0)))
    return out


def fit_all(checkpoints: pd.DataFrame) -> dict[FitKey, Fit]:
    return {key: f for key, obs in run_observations(checkpoints).items() if (f := fit(obs)) is not None}


def _files_per_rank(checkpoints: pd.DataFrame) -> dict[tuple[str, str], float]:
    if checkpoints.empty:
        return {}
    grouped = checkpoints.groupby(["point_id", "phase"], sort=False).agg(files=("files", "first"),
                                                                        active=("active_ranks", "max"))
    return {k: float(r.files) / max(1, int(r.active)) for k, r in grouped.iterrows()}


def measured(frame: pd.DataFrame) -> pd.Series:
    """Rows of measure points (the study's cells); rows with no role (imported, older) are measurements."""
    if frame.empty or "role" not in frame:
        return pd.Series(True, index=frame.index)
    return frame["role"].fillna("measure") == "measure"


def measured_row(row: dict[str, Any]) -> bool:
    return row.get("role") in (None, "measure")


def add_projections(summary: pd.DataFrame, checkpoints: pd.DataFrame,
                    nominal_bytes: Callable[[dict[str, Any]], float | None],
                    fits: dict[FitKey, Fit] | None = None) -> pd.DataFrame:
    """The projection columns of every cell (`nominal_bytes`: what a cell's phase moves at full size), and
    `projection_flag` where a projection reaches more than MAX_REACH times beyond the largest bytes per rank
    measured (its own column: the measurement is sound, the projection is what reaches)."""
    if summary.empty:
        return summary
    fits, files = fit_all(checkpoints) if fits is None else fits, _files_per_rank(checkpoints)
    records = [_cell_projection(r, fits, files, nominal_bytes) for r in summary.to_dict("records")]
    out = summary.copy()
    for col in PROJECTION_COLUMNS:
        out[col] = [r[col] for r in records]
    out["projection_flag"] = [r["flag"] for r in records]
    return out


def _cell_projection(rec: dict[str, Any], fits: dict[FitKey, Fit], files: dict[tuple[str, str], float],
                     nominal_bytes: Callable[[dict[str, Any]], float | None]) -> dict[str, Any]:
    nominal = nominal_bytes(rec)
    active = max(1, int(rec.get("active_ranks") or 1))
    first = str(rec.get("point_ids") or "").split(",")[0]
    key = fit_key(rec) if not any(missing(rec.get(c)) for c in SHAPE_COLUMNS) else None
    found = fits.get(key) if key else None
    projection: Projection | None
    if found is not None and nominal:
        projection = found.predict(files.get((first, str(rec.get("phase"))), 0.0), nominal / active,
                                   f" (shape {key[0] if key else '?'})")
    else:
        projection = plain_projection(nominal or 0.0, rec.get("bytes_over_time_GiBps") or 0.0,
                                      float(rec.get("scale") or 1.0))
    return projection_columns(projection)


def projection_columns(p: Projection | None) -> dict[str, Any]:
    if p is None:
        return {**dict.fromkeys(PROJECTION_COLUMNS, math.nan), "projection_basis": None, "flag": ""}
    flag = (f"projection reaches {p.reach:.0f}× beyond the largest size measured (scale {p.largest_scale:g}; "
            f"flagged beyond {MAX_REACH:g}×)") if p.beyond_reach else ""
    return {"projected_full_size_s": p.seconds, "projected_full_size_s_lo": p.low_s,
            "projected_full_size_s_hi": p.high_s, "projection_basis": p.basis,
            "projection_scale_max": p.largest_scale, "projection_reach": p.reach, "flag": flag}


def point_factors(checkpoints: pd.DataFrame, nominal_bytes: Callable[[dict[str, Any]], float | None],
                  fits: dict[FitKey, Fit] | None = None) -> pd.DataFrame:
    """Per point × phase with a fit: how much longer its phase takes at full size by the fit (fitted time at full
    size / fitted time at its own size), with the band's ends as factors too. What the cost view multiplies each
    repetition's measured seconds by; points of phases with no fit are absent (the caller scales by bytes)."""
    columns = ["point_id", "phase", "fit_factor", "fit_factor_lo", "fit_factor_hi", "projection_basis"]
    fits = fit_all(checkpoints) if fits is None else fits
    out = []
    if not checkpoints.empty:
        for (point_id, phase), g in checkpoints.groupby(["point_id", "phase"], sort=False):
            rec = {**g.iloc[0].to_dict(), "bytes": float(g["bytes"].iloc[0])}
            found = fits.get(fit_key(rec)) if not any(missing(rec.get(c)) for c in SHAPE_COLUMNS) else None
            nominal = nominal_bytes(rec)
            if found is None or not nominal:
                continue
            active = max(1, int(g["active_ranks"].max()))
            files = float(g["files"].iloc[0]) / active
            here = found.predict(files, rec["bytes"] / active).seconds
            full = found.predict(files, nominal / active)
            if here > 0:
                out.append((point_id, phase, full.seconds / here, full.low_s / here, full.high_s / here, full.basis))
    return pd.DataFrame.from_records(out, columns=columns)
