"""The training table per cell: every cost figure's mean with a 95% CI over repetitions, and the flags.

A cell is the summary's cell (`cell_key`); figures are computed per repetition (projected) and then pooled, so a
CI carries through projection and the model; where the projection is fitted, `<figure>_lo` / `_hi` are the fit's
95% band (the mean over repetitions of each end), beside the CI. Flags: the summary's adequacy flags of the
cell's write and read rows, plus what makes a cost figure hard to act on (`adequacy.cost_flags`). Rankings of
strategies are stated only where the CIs separate them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.adequacy import MEMORY_TIER, NO_FAILURE_RESTORE, cost_flags
from studyctl.analysis.cell_ci import ci_columns
from studyctl.analysis.cells import SETTINGS, independent, varying
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.projection.fit import MAX_REACH
from studyctl.analysis.training.cost import BAND_FIGURES
from studyctl.analysis.values import missing
from studyctl.definition.checkpoint.engine_options import ENGINE_SETTINGS

# Figures pooled per cell, each with `<name>_ci95` (half-width) beside its mean.
FIGURES = ("blocking_s", "staged_s", "interference_s", "wait_s", "background_s", "checkpoint_cost_s",
           "checkpoint_share", "total_waste", "young_interval_s", "daly_interval_s", "total_waste_at_daly",
           "lost_work_per_failure_s", "relaunch_s", "failure_restore_s", "restart_s", "restore_s", "read_s",
           "broadcast_s", "goodput", "restore_file_GiBps", "broadcast_GiBps")
FIRST = ("strategy", "restore", "tier_fstype", "replaced_nodes", "simulated_nodes", "nominal_checkpoint_bytes",
         "checkpoint_bytes", "nominal_restore_file_bytes", "nominal_broadcast_bytes", "job_mtbf_s", "job_nodes",
         "interval_s", "step_s", "compute", "allreduce_mib", "scale", "write_scale_max", "restore_scale_max")
ANY = ("projected", "contention")
# Each projected phase: the figure it carries in words, the table's column of its seconds.
PROJECTED_PHASES = (("write", "C", "checkpoint_cost_s"), ("restore", "R's restore", "failure_restore_s"))
# Engine settings that only a background save has, with every engine that has them (DCP's stager and executor).
ASYNC_ENGINE_ONLY = tuple(dict.fromkeys(
    n for _, background in ENGINE_SETTINGS.values() for n in background
    if not any(n in always for always, _ in ENGINE_SETTINGS.values())))
# Settings that apply to some strategies only: a ranking compares strategies across them, naming them.
STRATEGY_ONLY = ("replaced_nodes", "drain", "tier_keep", "tier", "step_s", "compute", "allreduce_mib",
                 *ASYNC_ENGINE_ONLY)
JOINED = ("restore_source", "relaunch_source", "projection_basis", "write_source")


def cost_cells(training: pd.DataFrame, summary_flags: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per cell: its settings, n, every figure's mean and CI, and its flags ("; "-joined)."""
    if training.empty or "checkpoint_cost_s" not in training:
        return pd.DataFrame()
    data = training[training["checkpoint_cost_s"].notna()]
    if data.empty:
        return pd.DataFrame()
    grouped = data.groupby("cell_key", sort=True, dropna=False)
    settings = [c for c in (*SETTINGS, "tool", "io_mode_used", "cold_read_method") if c in data]
    first = [c for c in dict.fromkeys([*settings, *FIRST]) if c in data]
    cells = grouped[first].first().join(grouped.size().rename("n"))
    cells = cells.join(ci_columns(grouped, [f for f in FIGURES if f in data]))
    bands = [f"{f}_{end}" for f in BAND_FIGURES for end in ("lo", "hi") if f"{f}_{end}" in data]
    cells = cells.join(grouped[bands].mean())  # the fit's band, over the cell's repetitions
    # with one repetition the interference CI is the worker's own, from the ranks' step samples
    own = grouped["interference_ci_s"].mean() if "interference_ci_s" in data else np.nan
    cells["interference_s_ci95"] = cells["interference_s_ci95"].fillna(own) if "interference_s" in data else np.nan
    for c in ANY:
        cells[c] = grouped[c].any() if c in data else False
    for phase, _, _ in PROJECTED_PHASES:  # the farthest any repetition reached
        cells[f"{phase}_reach"] = grouped[f"{phase}_reach"].max() if f"{phase}_reach" in data else np.nan
        cells[f"{phase}_fitted"] = grouped[f"{phase}_fitted"].all() if f"{phase}_fitted" in data else False
    for c in (c for c in JOINED if c in data):
        cells[c] = grouped[c].agg(lambda s: ", ".join(sorted(set(map(str, s)))))
    cells = cells.reset_index()
    for c in ("replaced_nodes", "tier_keep"):  # integer settings that a missing value made float
        if c in cells:
            cells[c] = cells[c].astype("Int64")
    flags = summary_flags or {}
    cells["flags"] = ["; ".join(dict.fromkeys([*_summary_flags_for_cost(flags.get(r["cell_key"], "")),
                                                *cost_flags(r), *reach_flags(r)]))
                      for r in cells.to_dict("records")]
    return cells


def reach_flags(row: dict[str, Any]) -> list[str]:
    """A projected phase that reaches more than MAX_REACH times beyond the largest bytes per rank measured."""
    flags = []
    for phase, figure, seconds in PROJECTED_PHASES:
        reach, scale = row.get(f"{phase}_reach", math.nan), row.get(f"{phase}_scale_max", math.nan)
        if missing(row.get(seconds)) or missing(reach) or float(reach) <= MAX_REACH * 1.001:
            continue
        how = "fitted projection" if row.get(f"{phase}_fitted") else "plain scaling"
        flags.append(f"{figure}: {how} reaches {float(reach):.0f}× beyond the largest size measured (scale "
                     f"{float(scale):g}; flagged beyond {MAX_REACH:g}×)")
    return flags


def _summary_flags_for_cost(flags: str) -> list[str]:
    """The summary's flags of a cell, less those about its own restore: the cost may use another cell's (a
    failure's) restore, and `cost_flags` says which restore it used and what it read."""
    return [f for f in flags.split("; ") if f and f not in (MEMORY_TIER, NO_FAILURE_RESTORE)]


def summary_flags(summary: pd.DataFrame) -> dict[str, str]:
    """cell_key → the summary's flags of its write and read rows, each said once."""
    if summary.empty or "flags" not in summary:
        return {}
    out: dict[str, str] = {}
    for key, flags in zip(summary["cell_key"], summary["flags"], strict=True):
        parts = [*out.get(key, "").split("; "), *str(flags or "").split("; ")]
        out[key] = "; ".join(dict.fromkeys(p for p in parts if p))
    return out


def display_axes(cells: pd.DataFrame) -> list[str]:
    """The settings that vary between cost cells, less those the others determine."""
    moving = varying(cells, exclude=("tool",))
    return independent(cells, moving) if moving else []


def _interval(row: dict[str, Any], name: str) -> tuple[float, float, float]:
    mean, half = float(row[name]), float(row.get(f"{name}_ci95", np.nan))
    return mean, mean - half, mean + half


def strategy_rankings(cells: pd.DataFrame, axes: list[str], figure: str = "total_waste") -> list[str]:
    """Per group of cells equal in every varying setting but the strategy: the strategies by `figure`, "<" where
    the 95% CIs separate two neighbours, "≈" (not separable at 95%) where they overlap or a CI is missing."""
    if cells.empty or "strategy" not in cells or cells["strategy"].nunique() < 2:
        return []
    rest = [a for a in axes if a != "strategy" and a not in STRATEGY_ONLY]
    own = [a for a in axes if a in STRATEGY_ONLY]
    groups = cells.groupby(rest, dropna=False, sort=True) if rest else [((), cells)]
    lines = []
    for _, g in groups:
        if g["strategy"].nunique() < 2:
            continue
        rows = sorted(g.to_dict("records"), key=lambda r: float(r[figure]))
        text = _ranked(rows, figure, own)
        where = describe_cell(rows[0], rest) if rest else "all cells"
        lines.append(f"{where}: {text}")
    return lines


def _ranked(rows: list[dict[str, Any]], figure: str, own: list[str]) -> str:
    parts = []
    for i, r in enumerate(rows):
        mean, low, high = _interval(r, figure)
        band = f" [{low:.2%}, {high:.2%}]" if np.isfinite(low) else " (no CI)"
        named = [a for a in own if not missing(r.get(a))]
        detail = f" ({describe_cell(r, named)})" if named else ""
        parts.append(f"{r['strategy']}{detail} {mean:.2%}{band}")
        if i + 1 < len(rows):
            _, low_next, _ = _interval(rows[i + 1], figure)
            parts.append("<" if np.isfinite(high) and np.isfinite(low_next) and high < low_next
                         else "≈ (not separable at 95%)")
    return " ".join(parts)
