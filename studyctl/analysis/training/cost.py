"""What each point's checkpoints cost training: the `training` table (one row per point), column-wise.

Rows come from `training.rows` (one per result, cached with the parse); here whole columns go through the pure
cost model in `studyctl.definition.inputs.training` (Daly's complete model):
  C  checkpoint cost = blocking + interference (signed mean, not clamped) + any wait for a persist that outlasts
     the interval;
  L  durable lag = the real background time (persist or drain), not capped at the interval;
  R  restart = relaunch (`training.restart_s`, else the point's measured launch time, else 0, said so) + the
     restore after a failure (tiered: one where a node lost its tier; see `failure_restore`); where the study
     measured a time to first step (`recovery:`), R is that restart's launch + restore + ready (`recovery_cost`).
A scaled run is projected to its full-size checkpoint. Where the study's runs give a fit of a phase's time
(`analysis.projection`: fixed costs do not grow with bytes), its write seconds and its restore are multiplied by
the fit's factor (fitted time at full size / at the run's own size), and the cost figures get the fit's 95% band
(`<figure>_lo`, `<figure>_hi`); else, labelled plain scaling, each phase by its own bytes: write seconds by
nominal / written checkpoint bytes, the restore by its nominal / measured bytes. File reads and broadcasts are
scaled by their own bytes; seconds named `_measured_s` are as measured. Each phase's projection says the largest
scale it rests on and its reach (`write_scale_max`, `write_reach`, `restore_…`: projected / largest bytes measured).

Bands are interval arithmetic on the model: every figure is monotone in the phase seconds (C, L and R grow with
them; waste, the intervals and lost work grow with C, L and R; goodput falls), so its ends are the model at the
ends of the fit's band, R included (a measured restart's restore at the restore band's ends). The centre is
inside by construction; a share of wall time is held to [0, 1] (a negative cost, interference noise, is no
waste), in the centre as at the ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.adequacy import NO_FAILURE_RESTORE
from studyctl.analysis.cells import identity_columns
from studyctl.analysis.training.recovery_cost import measured_restart, share_writes
from studyctl.definition.inputs import training as model
from studyctl.definition.inputs.training import HOUR_S, TrainingSpec
from studyctl.definition.inputs.yamlpos import load_yaml_bounded
from studyctl.errors import UserError
from studyctl.units import GIB

WRITE_SECONDS = ("blocking_s", "background_s", "interference_s", "interference_ci_s", "durable_s", "staged_s")
# Cost figures that carry the fit's band as `<name>_lo` / `<name>_hi`.
BAND_FIGURES = ("blocking_s", "restore_s", "checkpoint_cost_s", "checkpoint_share", "total_waste", "young_interval_s",
                "daly_interval_s", "total_waste_at_daly", "lost_work_per_failure_s", "restart_s", "goodput")
# The projected phase a banded figure rests on (the rest rest on both): a band only where that phase was fitted.
BAND_PHASE = {"restore_s": "restore", "restart_s": "restore", **dict.fromkeys(
    ("blocking_s", "checkpoint_cost_s", "checkpoint_share", "young_interval_s", "daly_interval_s",
     "lost_work_per_failure_s"), "write")}
PLAIN = "plain scaling (bytes ratio, no fit)"


def load_training(sweep_copy: Path) -> TrainingSpec:
    """The `training:` block of the sweep as submitted; defaults when the study keeps none (or a bad one)."""
    try:
        data = load_yaml_bounded(sweep_copy)
        return TrainingSpec.model_validate((data if isinstance(data, dict) else {}).get("training") or {})
    except (UserError, ValueError):  # missing or damaged copy, or a block this version cannot read
        return TrainingSpec()


def _col(t: pd.DataFrame, name: str) -> np.ndarray:
    """A column as floats (None → NaN); all NaN when the column is absent (older rows)."""
    if name not in t:
        return np.full(len(t), np.nan)
    return pd.to_numeric(t[name], errors="coerce").to_numpy(dtype=float)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den where both are known and positive, else 1.0 (nothing to project)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = num / den
    return np.where(np.isfinite(r) & (den > 0) & (num > 0), r, 1.0)


def _share(x: np.ndarray) -> np.ndarray:
    """A share of wall time, held to [0, 1]: a negative cost (interference noise) wastes nothing (NaN kept)."""
    return np.clip(x, 0.0, 1.0)


def _zero_nan(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), 0.0, x)


@dataclass(frozen=True)
class PhaseFactor:
    """One phase's projection per row: the factor, its band's ends, whether a fit gave it, and what it rests on."""

    factor: np.ndarray
    low: np.ndarray  # the central factor where no fit (no band)
    high: np.ndarray
    fitted: np.ndarray  # bool
    scale_max: np.ndarray  # the largest scale measured in its fit (the run's own where plain)
    reach: np.ndarray  # projected bytes per rank / the largest measured


def _fitted(t: pd.DataFrame, factors: pd.DataFrame | None, phase: str, plain: np.ndarray) -> PhaseFactor:
    """The fit's factor and band where it has one, else `plain` (a bytes ratio: its reach, from the run's scale)."""
    own_scale = _col(t, "scale")
    none = np.zeros(len(t), dtype=bool)
    if factors is None or factors.empty:
        return PhaseFactor(plain, plain, plain, none, own_scale, plain)
    f = factors[factors["phase"] == phase].drop_duplicates("point_id").set_index("point_id")
    fitted, lo, hi, scale, reach = (t["point_id"].map(f[c]).to_numpy(dtype=float) for c in (
        "fit_factor", "fit_factor_lo", "fit_factor_hi", "projection_scale_max", "projection_reach"))
    have = ~np.isnan(fitted)
    return PhaseFactor(np.where(have, fitted, plain), np.where(have, lo, plain), np.where(have, hi, plain), have,
                       np.where(have, scale, own_scale), np.where(have, reach, plain))


def _project(t: pd.DataFrame, factors: pd.DataFrame | None = None) -> tuple[PhaseFactor, PhaseFactor]:
    """Per-phase projection factors and the projected seconds (in place); `_measured_s` keeps what was measured.
    Returns the write's and the restore's factors with their bands."""
    write = _fitted(t, factors, "write", _ratio(_col(t, "nominal_checkpoint_bytes"), _col(t, "checkpoint_bytes")))
    restore = _fitted(t, factors, "read", _ratio(_col(t, "nominal_restore_bytes"), _col(t, "restore_bytes")))
    t["projection_basis"] = np.where(write.fitted | restore.fitted, "fit (analysis.projection)", PLAIN)
    for name, phase in (("write", write), ("restore", restore)):
        t[f"{name}_scale_max"], t[f"{name}_reach"], t[f"{name}_fitted"] = phase.scale_max, phase.reach, phase.fitted
    from_files = _col(t, "tier_bytes") + _col(t, "shared_bytes")
    files = _ratio(_col(t, "nominal_restore_file_bytes"), from_files)
    broadcast = _ratio(_col(t, "nominal_restore_bytes") - _col(t, "nominal_restore_file_bytes"),
                       _col(t, "broadcast_bytes"))
    scaled = {**dict.fromkeys(WRITE_SECONDS, write.factor), "restore_s": restore.factor, "read_s": files,
              "broadcast_s": broadcast}
    for name, factor in scaled.items():
        measured = _col(t, name)
        t[f"{name.removesuffix('_s')}_measured_s"] = measured
        t[name] = measured * factor
    t["projection_factor"], t["restore_projection_factor"] = write.factor, restore.factor
    t["projected"] = (write.factor != 1.0) | (restore.factor != 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t["restore_file_GiBps"] = from_files / GIB / _col(t, "read_measured_s")
        t["broadcast_GiBps"] = _col(t, "broadcast_bytes") / GIB / _col(t, "broadcast_measured_s")
    t["nominal_broadcast_bytes"] = _col(t, "nominal_restore_bytes") - _col(t, "nominal_restore_file_bytes")
    return write, restore


def _add_bands(t: pd.DataFrame, spec: TrainingSpec, write: PhaseFactor, restore: PhaseFactor) -> None:
    """`<figure>_lo` / `<figure>_hi`: the cost model run at each end of the fit's band (NaN where the row has no
    fit, or no figure). Each figure is monotone in the seconds, so its ends are the model's at the band's ends,
    whichever gives the lower; the centre is held inside (a figure the model leaves undefined at one end, Daly's
    interval at no cost, keeps the other end and the centre)."""
    ends = []
    for lo_hi in ("low", "high"):
        copy = t.copy()
        for name in WRITE_SECONDS:
            copy[name] = _col(t, f"{name.removesuffix('_s')}_measured_s") * getattr(write, lo_hi)
        copy["restore_s"] = _col(t, "restore_measured_s") * getattr(restore, lo_hi)
        copy["restore_projection_factor"] = getattr(restore, lo_hi)  # a measured restart's restore too
        _add_costs(copy, spec)
        ends.append(copy)
    moved = {"write": write.fitted, "restore": restore.fitted, "both": write.fitted | restore.fitted}
    for name in BAND_FIGURES:
        centre = _col(t, name)
        a, b = _col(ends[0], name), _col(ends[1], name)
        lo, hi = np.fmin(np.fmin(a, b), centre), np.fmax(np.fmax(a, b), centre)
        keep = moved[BAND_PHASE.get(name, "both")] & ~np.isnan(centre) & (hi > lo)  # no width: nothing projected
        t[f"{name}_lo"] = np.where(keep, lo, np.nan)
        t[f"{name}_hi"] = np.where(keep, hi, np.nan)


def job_mtbf(spec: TrainingSpec, nodes: np.ndarray) -> np.ndarray:
    """The job's MTBF per row (NaN when the block gives no failure figure): node MTBF / the job's nodes."""
    if spec.job_failures_per_day is not None:
        return np.full(len(nodes), model.DAY_S / spec.job_failures_per_day)
    if spec.node_mtbf_h is not None:
        return spec.node_mtbf_h * HOUR_S / (np.full(len(nodes), float(spec.nodes)) if spec.nodes else nodes)
    return np.full(len(nodes), np.nan)


def _sibling_keys(t: pd.DataFrame) -> pd.Series:
    """A cell's identity without `replaced_nodes`: tiered cells that differ only in it share a key."""
    cols = [c for c in identity_columns(t) if c != "replaced_nodes"]
    return pd.util.hash_pandas_object(t[cols].astype(str), index=False)


def failure_restore(t: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """The restore a failure needs per row, and where it came from: a tiered point measured with no node
    replaced takes the mean restore of the same cell with the fewest replaced nodes (≥ 1) when the study has it;
    else its own restore, flagged as a no-failure restore."""
    restore = _col(t, "restore_s")
    source = np.where(np.isnan(restore), "none measured", "own").astype(object)
    replaced = _col(t, "replaced_nodes")
    alone = (t["strategy"].to_numpy() == "tiered") & (replaced == 0) & ~np.isnan(restore)
    if not alone.any():
        return restore, list(source)
    keys = _sibling_keys(t)
    failed = (replaced >= 1) & ~np.isnan(restore)
    donors = (pd.DataFrame({"key": keys[failed], "n": replaced[failed], "restore": restore[failed]})
              .groupby(["key", "n"], sort=True)["restore"].mean().reset_index().drop_duplicates("key"))
    found = keys[alone].map(dict(zip(donors["key"], donors["restore"], strict=True)))
    nearest = keys[alone].map(dict(zip(donors["key"], donors["n"], strict=True)))
    idx = np.flatnonzero(alone)
    have = found.notna().to_numpy()
    restore = restore.copy()
    restore[idx[have]] = found.to_numpy(dtype=float)[have]
    source[idx[have]] = [f"cell with replaced_nodes {int(n)}" for n in nearest.to_numpy()[have]]
    source[idx[~have]] = NO_FAILURE_RESTORE
    return restore, list(source)


def _relaunch(t: pd.DataFrame, spec: TrainingSpec) -> tuple[np.ndarray, np.ndarray]:
    if spec.restart_s is not None:
        return np.full(len(t), spec.restart_s), np.full(len(t), "given (training.restart_s)", dtype=object)
    launch = _col(t, "launch_s")
    known = ~np.isnan(launch)
    return np.where(known, launch, 0.0), np.where(known, "measured launch", "not measured: 0 s assumed")


def _add_costs(t: pd.DataFrame, spec: TrainingSpec) -> None:
    """Daly's complete model on whole columns, at the sweep's interval and at Daly's interval (in place)."""
    interval = spec.interval_s
    blocking, interference = _col(t, "blocking_s"), _zero_nan(_col(t, "interference_s"))
    lag = _zero_nan(_col(t, "background_s"))
    mtbf = job_mtbf(spec, _col(t, "nodes"))
    relaunch, t["relaunch_source"] = _relaunch(t, spec)
    restore, t["restore_source"] = failure_restore(t)
    relaunch, restore = measured_restart(t, spec, relaunch, restore)  # a measured time to first step (recovery)
    restart = relaunch + _zero_nan(restore)
    cost = blocking + interference + np.maximum(lag - interval, 0.0)
    daly = model.daly_interval_s(cost, mtbf)
    cost_at_daly = blocking + interference + np.maximum(lag - daly, 0.0)
    waste = _share(model.total_waste_share(interval, cost, mtbf, restart, lag))
    t["interval_s"], t["job_nodes"], t["job_mtbf_s"] = interval, spec.nodes or _col(t, "nodes"), mtbf
    t["real_step_s"], t["interval_steps"] = spec.step_s, spec.interval_steps  # the inputs, stated in the report
    t["node_mtbf_h"], t["job_failures_per_day"] = spec.node_mtbf_h, spec.job_failures_per_day
    t["relaunch_s"], t["failure_restore_s"], t["restart_s"], t["durable_lag_s"] = relaunch, restore, restart, lag
    t["wait_s"] = np.maximum(lag - interval, 0.0) * ~np.isnan(blocking)
    t["checkpoint_cost_s"] = cost
    t["checkpoint_share"] = model.checkpoint_share(interval, cost)
    t["total_waste"] = waste
    t["young_interval_s"] = model.young_interval_s(cost, mtbf)
    t["daly_interval_s"] = daly
    t["total_waste_at_daly"] = _share(model.total_waste_share(daly, cost_at_daly, mtbf, restart, lag))
    t["lost_work_per_failure_s"] = (interval + cost) / 2.0 + lag
    t["goodput"] = 1.0 - waste
    cores = _col(t, "host_cores")
    t["contention"] = (_col(t, "ranks_on_host") + _zero_nan(_col(t, "background_threads_on_host"))) > cores


def training_table(rows: list[dict[str, Any]], spec: TrainingSpec, factors: pd.DataFrame | None = None
                   ) -> pd.DataFrame:
    """One row per point: measured means, their projection to full size (`factors`: the fit's per point and
    phase, `projection.table.point_factors`), and the cost model's columns with the fit's band."""
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame.from_records(rows).sort_values("point_id", kind="stable", ignore_index=True)
    share_writes(table, (*WRITE_SECONDS, "checkpoint_bytes"))  # recovery scenarios of one cell: one write
    write, restore = _project(table, factors)
    _add_costs(table, spec)
    _add_bands(table, spec, write, restore)
    return table
