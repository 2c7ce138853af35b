"""What each point's checkpoints cost training: the `training` table (one row per point).

From the measured strategy fields (means over the point's checkpoints and restores) and the sweep's
`training:` block, through the pure cost model in `studyctl.definition.training`. A scaled run (scale < 1)
is projected to its nominal checkpoint size at the bandwidth it measured, and the row says so
(`projected`, `projection_factor`); seconds named `_measured_s` are as measured.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from studyctl.definition.result_schema import Result
from studyctl.definition.training import CostInputs, TrainingSpec, projection_factor, training_cost
from studyctl.definition.yamlpos import load_yaml_bounded
from studyctl.errors import UserError

# Per-checkpoint strategy fields carried into rows (write and read ones; the rest of StrategyTiming is derived).
WRITE_FIELDS = ("blocking_s", "background_s", "background_bytes", "background_GiBps", "compute_steps",
                "compute_step_s_mean", "compute_slowdown", "interference_s")
READ_FIELDS = ("tier_bytes", "shared_bytes", "read_s", "broadcast_s", "broadcast_bytes")
# Seconds that scale with the checkpoint size when a scaled run is projected to its nominal size.
PROJECTED = ("blocking_s", "background_s", "interference_s", "durable_s", "restore_s", "read_s", "broadcast_s")


def strategy_rows(r: Result, base: dict[str, Any]) -> list[dict[str, Any]]:
    """One plain row per checkpoint and restore; results from before strategies count as sync."""
    measured = {(c.phase, c.index): c for c in r.checkpoints}
    opts = r.point.checkpoint
    tiered = opts.strategy == "tiered"
    base = {**base, "drain": opts.drain if tiered else None, "tier_keep": opts.tier_keep if tiered else None,
            "replaced_nodes": opts.replaced_nodes if tiered else None, "step_s": opts.step_s}
    rows = []
    if r.strategy is not None:
        for s in r.strategy.checkpoints:
            c = measured.get((s.phase, s.index))
            if c is None:
                continue
            names = WRITE_FIELDS if s.phase == "write" else READ_FIELDS
            rows.append({**base, "phase": s.phase, "index": s.index, "span_s": c.span_s,
                         "duration_s": c.duration_max_s, "bytes": c.bytes, **{n: getattr(s, n) for n in names}})
        return rows
    for c in r.checkpoints:
        extra = {"blocking_s": c.duration_max_s} if c.phase == "write" else {"shared_bytes": c.bytes,
                                                                              "read_s": c.duration_max_s}
        rows.append({**base, "phase": c.phase, "index": c.index, "span_s": c.span_s, "duration_s": c.duration_max_s,
                     "bytes": c.bytes, **extra})
    return rows


def load_training(sweep_copy: Path) -> TrainingSpec:
    """The `training:` block of the sweep as submitted; defaults when the study keeps none (or a bad one)."""
    try:
        data = load_yaml_bounded(sweep_copy)
        return TrainingSpec.model_validate((data if isinstance(data, dict) else {}).get("training") or {})
    except (UserError, ValueError):  # missing or damaged copy, or a block this version cannot read
        return TrainingSpec()


def _mean(frame: pd.DataFrame, column: str) -> float:
    if column not in frame or frame[column].isna().all():
        return math.nan
    return float(frame[column].mean())


def _point_row(g: pd.DataFrame, config: list[str]) -> dict[str, Any]:
    writes, reads = g[g["phase"] == "write"], g[g["phase"] == "read"]
    row = dict(g.iloc[0][config])
    row.update({f: _mean(writes, f) for f in WRITE_FIELDS})
    row.update({f: _mean(reads, f) for f in READ_FIELDS})
    row.update(checkpoint_bytes=_mean(writes, "bytes"), durable_s=_mean(writes, "span_s"),
               restore_s=_mean(reads, "duration_s"), restore_bytes=_mean(reads, "bytes"))
    return row


def training_table(rows: list[dict[str, Any]], spec: TrainingSpec) -> pd.DataFrame:
    """One row per point: measured means, their projection to full size, and the cost model's columns."""
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame.from_records(rows)
    measures = {"phase", "index", "span_s", "duration_s", "bytes", *WRITE_FIELDS, *READ_FIELDS}
    config = [c for c in frame.columns if c not in measures]
    records = [_point_row(g, config) for _, g in frame.groupby("point_id", sort=True)]
    table = pd.DataFrame.from_records(records)
    return table.apply(lambda r: pd.Series({**r.to_dict(), **_costs(r, spec)}), axis=1)


def _costs(row: pd.Series, spec: TrainingSpec) -> dict[str, Any]:
    written = row.get("checkpoint_bytes")
    factor = projection_factor(int(written), int(row["nominal_checkpoint_bytes"])) if written == written else 1.0
    out: dict[str, Any] = {"projection_factor": factor, "projected": factor != 1.0}
    for name in PROJECTED:
        out[f"{name.removesuffix('_s')}_measured_s"] = row[name]
        out[name] = row[name] * factor
    mtbf = spec.job_mtbf_s(int(row["nodes"]))
    out.update(interval_s=spec.interval_s, job_mtbf_s=mtbf)
    blocking = out["blocking_s"]
    if blocking != blocking:  # no write phase: nothing to cost
        return out
    restore = out["restore_s"] if out["restore_s"] == out["restore_s"] else 0.0
    interference = out["interference_s"] if out["interference_s"] == out["interference_s"] else 0.0
    background = out["background_s"] if out["background_s"] == out["background_s"] else 0.0
    cost = training_cost(CostInputs(blocking_s=blocking, interval_s=spec.interval_s, mtbf_s=mtbf,
                                    interference_s=interference, background_s=background, restore_s=restore))
    out.update(cost.as_dict())
    return out


# What the report shows per cell of the training table (means over repetitions).
COST_COLUMNS = ("blocking_s", "checkpoint_cost_s", "overhead_share", "optimal_interval_s", "optimal_overhead_share",
                "goodput", "lost_work_per_failure_s", "restore_s")


def cost_summary(training: pd.DataFrame) -> tuple[list[str], list[dict[str, Any]]]:
    """(the settings that vary, one record per cell): what checkpoints cost training, repetitions pooled."""
    from studyctl.analysis.cells import SETTINGS, independent

    if training.empty or "overhead_share" not in training:
        return [], []
    varying = [c for c in SETTINGS if c in training and training[c].astype(str).nunique(dropna=False) > 1]
    axes = independent(training, varying)  # a tier setting that follows from the strategy adds no row identity
    keys = axes or ["model"]
    present = [c for c in COST_COLUMNS if c in training]
    grouped = training.groupby(keys, dropna=False, sort=True)
    cells = grouped[present].mean().join(grouped.size().rename("n")).join(grouped["projected"].any())
    return keys, [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
                  for row in cells.reset_index().to_dict("records")]
