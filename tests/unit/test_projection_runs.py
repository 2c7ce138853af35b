"""The projection's runs, built by column, against the row-at-a-time computation they replaced (kept here only as
the reference): the same observations, files per rank and cost factors to the last bit, on a generated study
with calibration scales, two layouts, reads, runs of more than eight checkpoints, and on the same rows shuffled,
with spans missing, imported rows without a shape and rows of no point."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from studyctl.analysis.projection.fit import Fit, Observation, fit
from studyctl.analysis.projection.table import (
    SHAPE_COLUMNS,
    FitKey,
    _files_per_rank,
    fit_all,
    fit_key,
    point_factors,
    run_observations,
)
from studyctl.analysis.tables import NOMINAL_COLUMNS, build_tables, phase_nominal_bytes
from studyctl.analysis.values import missing
from tests.resultgen import make_point, write_result


# --- the reference: the row-at-a-time code the column-wise runs replaced ---------------------------------------
def old_run_observations(checkpoints: pd.DataFrame) -> dict[FitKey, list[Observation]]:
    out: dict[FitKey, list[Observation]] = {}
    if checkpoints.empty:
        return out
    for _, g in checkpoints.groupby(["point_id", "phase"], sort=False):
        first = g.iloc[0].to_dict()
        if missing(first.get("nodes")) or missing(first.get("block_mib")):
            continue
        active = max(1, int(g["active_ranks"].max()))
        out.setdefault(fit_key(first), []).append(Observation(
            files_per_rank=float(g["files"].iloc[0]) / active, bytes_per_rank=float(g["bytes"].iloc[0]) / active,
            seconds=float(g["span_s"].mean()), scale=float(first.get("scale") or 1.0)))
    return out


def old_fit_all(checkpoints: pd.DataFrame) -> dict[FitKey, Fit]:
    return {key: f for key, obs in old_run_observations(checkpoints).items() if (f := fit(obs)) is not None}


def old_files_per_rank(checkpoints: pd.DataFrame) -> dict[tuple[str, str], float]:
    if checkpoints.empty:
        return {}
    grouped = checkpoints.groupby(["point_id", "phase"], sort=False).agg(files=("files", "first"),
                                                                        active=("active_ranks", "max"))
    return {k: float(r.files) / max(1, int(r.active)) for k, r in grouped.iterrows()}


def old_point_factors(checkpoints: pd.DataFrame, nominal_bytes: Callable[[dict[str, Any]], float | None],
                      fits: dict[FitKey, Fit]) -> pd.DataFrame:
    columns = ["point_id", "phase", "fit_factor", "fit_factor_lo", "fit_factor_hi", "projection_basis",
               "projection_scale_max", "projection_reach"]
    out = []
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
            out.append((point_id, phase, full.seconds / here, full.low_s / here, full.high_s / here, full.basis,
                        full.largest_scale, full.reach))
    return pd.DataFrame.from_records(out, columns=columns)
# -----------------------------------------------------------------------------------------------------------------


def study(tmp_path: Path) -> pd.DataFrame:
    """A study's checkpoints table: two layouts × two I/O modes × 1 and 2 nodes, measured at scale 0.001 and
    calibrated at 0.01 and 0.1, three repetitions, bandwidths that vary per checkpoint; some runs of 9 and 11
    checkpoints (a mean over more than eight values sums in another order)."""
    root = tmp_path / "runs"
    root.mkdir()
    i = 0
    for zero in (1, 3):
        for io_mode in ("buffered", "direct"):
            for nodes in (1, 2):
                for scale, role in ((0.001, "measure"), (0.01, "calibration"), (0.1, "calibration")):
                    for rep in range(3):
                        writes, reads = (9, 11) if (zero, rep) == (3, 1) else (3, 2)
                        p = make_point(zero=zero, nodes=nodes, io_mode=io_mode, rep=rep, scale=scale,
                                       writes=writes, reads=reads)
                        p = p.model_copy(update={"role": role}) if role != "measure" else p
                        i += 1
                        bw = 1.7 * nodes ** 0.8 * (1 + 0.05 * math.sin(i)) * (0.3 + scale ** 0.3)
                        write_result(root, p, [bw * (1 + 0.013 * math.cos(i * k)) for k in range(writes)],
                                     [1.3 * bw * (1 - 0.011 * math.sin(i + k)) for k in range(reads)], by_layout=True)
    return build_tables(root).checkpoints


def variants(checkpoints: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The table as collected, and as other inputs may have it."""
    rng = np.random.default_rng(7)
    shuffled = checkpoints.sample(frac=1.0, random_state=3).reset_index(drop=True)
    gaps = checkpoints.copy()
    gaps.loc[rng.random(len(gaps)) < 0.1, "span_s"] = math.nan  # a checkpoint with no span
    imported = checkpoints.head(12).copy()
    imported["point_id"] = "dlio-" + imported["point_id"]
    imported["block_mib"] = math.nan  # DLIO's rows: no block, so no shape
    stray = checkpoints.head(3).copy()
    stray["point_id"] = None  # no point: in no run
    mixed = pd.concat([checkpoints, imported, stray], ignore_index=True).sample(frac=1.0, random_state=5)
    return {"collected": checkpoints, "shuffled": shuffled, "spans missing": gaps, "mixed": mixed,
            "empty": checkpoints.head(0)}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    return variants(study(tmp_path_factory.mktemp("proj")))


def test_the_study_has_what_the_comparison_needs(tables: dict[str, pd.DataFrame]) -> None:
    obs = old_run_observations(tables["collected"])
    fits = old_fit_all(tables["collected"])
    assert len(fits) == 8  # 2 I/O modes × 2 node counts × 2 phases, each over both layouts
    assert any(f.separable for f in fits.values())  # two file counts per rank: the per-file term fitted
    sizes = tables["collected"].groupby(["point_id", "phase"]).size()
    assert {3, 2, 9, 11} <= set(sizes)
    assert len({o.scale for group in obs.values() for o in group}) == 3


@pytest.mark.parametrize("variant", ["collected", "shuffled", "spans missing", "mixed", "empty"])
def test_observations_and_fits_are_the_row_wise_ones_to_the_last_bit(tables: dict[str, pd.DataFrame],
                                                                     variant: str) -> None:
    checkpoints = tables[variant]
    new, old = run_observations(checkpoints), old_run_observations(checkpoints)
    assert list(new) == list(old)  # keys in the same order, observations in the same order
    assert repr(new) == repr(old)  # every float to the last bit (repr: NaN equals NaN)
    assert repr(fit_all(checkpoints)) == repr(old_fit_all(checkpoints))


@pytest.mark.parametrize("variant", ["collected", "shuffled", "spans missing", "mixed", "empty"])
def test_cost_factors_and_files_per_rank_are_the_row_wise_ones(tables: dict[str, pd.DataFrame],
                                                                 variant: str) -> None:
    checkpoints = tables[variant]
    fits = old_fit_all(checkpoints)
    new = point_factors(checkpoints, phase_nominal_bytes, fits)
    old = old_point_factors(checkpoints, phase_nominal_bytes, fits)
    assert len(new) == len(old) and (variant == "empty" or len(new) > 0)
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    # the first rows cut to what the fit and `phase_nominal_bytes` read: the same factors
    pd.testing.assert_frame_equal(point_factors(checkpoints, phase_nominal_bytes, fits, NOMINAL_COLUMNS), old,
                                  check_exact=True)
    assert repr(_files_per_rank(checkpoints)) == repr(old_files_per_rank(checkpoints))
