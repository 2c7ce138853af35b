"""Fits per resource shape from a study's checkpoint rows, and each cell's projected full-size time with its band.

Every run of the study is an observation, calibration points included (`Point.role == "calibration"`: extra
runs at larger scales the study added for this fit); only the cells of measure points get a projection. A run
is one point × phase: its mean span per checkpoint, against the bytes and files each rank that moved bytes
moved. Where no fit exists the cell keeps the plain figure (nominal bytes over its own bandwidth), labelled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.projection.fit import MAX_REACH, Fit, Observation, Projection, fit, plain_projection
from studyctl.analysis.values import missing
from studyctl.definition.planning.fit_group import FIT_KEYS
from studyctl.definition.planning.shapes import Shape

# A fit is per shape (these columns), phase and FIT_KEYS (`definition.planning.fit_group`, which calibration groups by
# too).
SHAPE_COLUMNS = ("nodes", "ranks_per_node", "filesystem", "io_mode", "block_mib")
PROJECTION_COLUMNS = ("projected_full_size_s", "projected_full_size_s_lo", "projected_full_size_s_hi",
                      "projection_basis", "projection_scale_max", "projection_reach")
FitKey = tuple[Any, ...]


def fit_key(row: dict[str, Any]) -> FitKey:
    values = [row[c] for c in SHAPE_COLUMNS]
    try:
        key = _shape_key(*values)
    except TypeError:  # an unhashable value: no cache
        key = Shape(*values).key
    return (key, row.get("phase"), *(row.get(k) for k in FIT_KEYS))


@lru_cache(maxsize=4096, typed=True)  # typed: 4 and 4.0 print differently
def _shape_key(*values: Any) -> str:
    """A shape's key once per distinct shape (a dataclass and its string per run were a second of a re-collect)."""
    return Shape(*values).key


RUN = ["point_id", "phase"]  # one run: a point's phase, over its checkpoints


@dataclass(frozen=True)
class Run:
    """One point × phase: its first checkpoint's row, and what its checkpoints give together."""

    first: dict[str, Any]
    active_max: Any  # the most ranks that moved bytes in one checkpoint (as the table has it: NaN if none said)
    files_first: Any  # the first files count the table has for it (NaN skipped)
    span_s: float  # mean span per checkpoint (NaN skipped)

    @property
    def active(self) -> int:
        return max(1, int(self.active_max))

    @property
    def shaped(self) -> bool:
        return not any(missing(self.first.get(c)) for c in SHAPE_COLUMNS)


def runs(checkpoints: pd.DataFrame, columns: Sequence[str] | None = None) -> list[Run]:
    """Every run with a point and a phase, in the order of its first row, built by column: a row at a time through
    pandas was nearly all of a re-collect at 10,000 results. `columns`: of the first row, those to keep (all if
    None; one absent from the table is absent from `first` too)."""
    if checkpoints.empty:
        return []
    grouped = checkpoints.groupby(RUN, sort=False)
    codes = grouped.ngroup().fillna(-1).to_numpy(dtype=np.int64)  # -1: no point or phase, in no run
    firsts = np.flatnonzero(grouped.cumcount().to_numpy() == 0)  # NaN where no run: never 0
    keep = [c for c in (checkpoints.columns if columns is None else columns) if c in checkpoints.columns]
    rows = [dict(zip(keep, values, strict=True))
            for values in zip(*(checkpoints[c].take(firsts).tolist() for c in keep), strict=True)]
    active = grouped["active_ranks"].max().tolist() if "active_ranks" in checkpoints else [math.nan] * len(firsts)
    files = grouped["files"].first().tolist() if "files" in checkpoints else [math.nan] * len(firsts)
    spans = (_group_means(checkpoints["span_s"].to_numpy(dtype=float), codes, len(firsts))
             if "span_s" in checkpoints else np.full(len(firsts), math.nan))
    return [Run(*r) for r in zip(rows, active, files, spans.tolist(), strict=True)]


def _group_means(values: np.ndarray, codes: np.ndarray, groups: int) -> np.ndarray:
    """Per group, the mean of its values with NaN left out, equal to the last bit to pandas' `Series.mean` of the
    group (the groupby's own mean sums another way): each group's values summed as one contiguous array, groups of
    one size at once."""
    inside = codes >= 0
    order = np.argsort(codes[inside], kind="stable")
    v, c = values[inside][order], codes[inside][order]
    counts = np.bincount(c, minlength=groups)
    valid = np.bincount(c, weights=~np.isnan(v), minlength=groups)
    v = np.where(np.isnan(v), 0.0, v)
    starts = np.cumsum(counts) - counts
    sums = np.zeros(groups)
    for size in np.unique(counts[counts > 0]):
        which = np.flatnonzero(counts == size)
        sums[which] = v[starts[which][:, None] + np.arange(size)].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(valid > 0, sums / valid, math.nan)


FIT_COLUMNS = (*SHAPE_COLUMNS, "phase", *FIT_KEYS, "scale", "files", "bytes")


def run_observations(checkpoints: pd.DataFrame) -> dict[FitKey, list[Observation]]:
    """Per fit key, one observation per point × phase (every role)."""
    out: dict[FitKey, list[Observation]] = {}
    for run in runs(checkpoints, FIT_COLUMNS):
        first = run.first
        if missing(first.get("nodes")) or missing(first.get("block_mib")):
            continue  # imported rows (e.g. DLIO's) without a shape
        active = run.active
        out.setdefault(fit_key(first), []).append(Observation(
            files_per_rank=float(first["files"]) / active, bytes_per_rank=float(first["bytes"]) / active,
            seconds=float(run.span_s), scale=float(first.get("scale") or 1.0)))
    return out


def fit_all(checkpoints: pd.DataFrame) -> dict[FitKey, Fit]:
    return {key: f for key, obs in run_observations(checkpoints).items() if (f := fit(obs)) is not None}


def _files_per_rank(checkpoints: pd.DataFrame) -> dict[tuple[str, str], float]:
    return {(r.first["point_id"], r.first["phase"]): float(r.files_first) / max(1, int(r.active_max))
            for r in runs(checkpoints, RUN)}


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
                  fits: dict[FitKey, Fit] | None = None, nominal_columns: Sequence[str] | None = None
                  ) -> pd.DataFrame:
    """Per point × phase with a fit: how much longer its phase takes at full size by the fit (fitted time at full
    size / fitted time at its own size), with the band's ends as factors too, and the largest scale and the reach
    it rests on. What the cost view multiplies each repetition's measured seconds by; points of phases with no fit
    are absent (the caller scales by bytes). `nominal_columns`: those `nominal_bytes` reads, when known: each run's
    first row is then built of those and the fit's alone (every column of 20,000 rows was a second of a collect)."""
    columns = ["point_id", "phase", "fit_factor", "fit_factor_lo", "fit_factor_hi", "projection_basis",
               "projection_scale_max", "projection_reach"]
    fits = fit_all(checkpoints) if fits is None else fits
    out = []
    keep = None if nominal_columns is None else [*FIT_COLUMNS, "point_id", *nominal_columns]
    for run in runs(checkpoints, keep):
        rec = {**run.first, "bytes": float(run.first["bytes"])}
        found = fits.get(fit_key(rec)) if run.shaped else None
        nominal = nominal_bytes(rec)
        if found is None or not nominal:
            continue
        active = run.active
        files = float(rec["files"]) / active
        here = found.predict(files, rec["bytes"] / active).seconds
        full = found.predict(files, nominal / active)
        if here > 0:
            out.append((rec["point_id"], rec["phase"], full.seconds / here, full.low_s / here, full.high_s / here,
                        full.basis, full.largest_scale, full.reach))
    return pd.DataFrame.from_records(out, columns=columns)
