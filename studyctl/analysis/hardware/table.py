"""How close to the hardware each cell came: ceiling shares, the per-rank time split, and a named limit.

Ceiling results (`Point.role == "ceiling"`) are never cells: they form their own `ceilings` table (one row per
ceiling point) and join the cells by resource shape (`definition.planning.shapes`, the one definition of a shape), the
median over a shape's ceiling points standing for it. Columns this adds to the summary (per cell × phase):
  shape, ceiling_GiBps / ceiling_share (the shape's storage ceiling for the phase, largest shard per rank),
  even_ceiling_GiBps / even_ceiling_share, peak_GiBps / peak_share (the filesystem's stated peak),
  slowest_<part>_share and mean_<part>_share (open, transfer, fsync, close: of a rank's time), bytes_per_rank_max,
  bytes_per_rank_mean, bytes_max_over_mean, heavy_rank_files, heaviest_time_over_mean with heaviest_time_low / _high
  and calls_share_low / _high, calls_fsync_share_low / _high (the per-file calls' share's, with and without fsync:
  the 95% intervals over the cell's rank_checkpoints, `rank_intervals`), limit, limit_evidence, limit_caveat;
  for engine cells (`analysis.engines`) stream_GiBps and time_over_stream (with its CI) from the stream cell of the
  same shape, and framework_share (with its CI), framework_basis, framework_note.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.adequacy import reads_memory
from studyctl.analysis.cells import DERIVED, HEADLINE, independent, varying
from studyctl.analysis.engines import TWIN_COLUMNS, engine_of, framework_share, stream_twins
from studyctl.analysis.hardware.ceiling_ci import pooled, round_columns
from studyctl.analysis.hardware.ceiling_gaps import gap_lines, no_ceiling_line
from studyctl.analysis.hardware.ceiling_match import count, like_ceiling, phase_ceiling, residency, shape_key
from studyctl.analysis.hardware.limit_facts import pct_ci, rate_ci
from studyctl.analysis.hardware.limits import CellFacts, name_limit
from studyctl.analysis.hardware.rank_load import SPLIT_FIELDS
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.status import PointStatus
from studyctl.analysis.values import missing
from studyctl.definition.inputs.tdist import half_width
from studyctl.definition.inputs.yamlpos import load_yaml_bounded
from studyctl.errors import UserError
from studyctl.units import GIB

# What a ceiling point says about how its probe ran, beside its rates (`hardware.rank_load.ceiling_row`).
PROBE_FACTS = ("cold_read_method", "io_mode_used", "largest_shard_bytes", "streamed_bytes_per_rank")
CEILING_RATES = ("storage_write_GiBps", "storage_read_GiBps", "even_write_GiBps", "even_read_GiBps",
                 "network_p2p_GiBps", "network_bcast_GiBps", "memcpy_GiBps_per_rank", "memcpy_GiBps")
PARTS = tuple(f.removesuffix("_s") for f in SPLIT_FIELDS if f != "other_s")  # open, transfer, fsync, close
CHECKPOINT = ["point_id", "phase", "index"]
# An engine point's seconds per phase in the training table (`training.rows.engine_row`): the framework's share
# where the shape has no stream cell.
ENGINE_SPLIT = tuple(f"engine_{phase}{part}_s" for phase in ("write", "read") for part in ("", "_storage"))
# What a figure measured on simulated nodes means (one machine's disk and memory shared by every "node").
SIMULATED_CEILING = "simulated nodes: one machine's disk and memory stand for every node; the ceiling is that machine's"


def stated_peaks(sweep_copy: Path) -> dict[str, float]:
    """filesystem name → its stated `peak_GiBps` from the study's copy of the sweep (validated when the sweep was
    loaded); {} when there is no copy or it names none."""
    try:
        data = load_yaml_bounded(sweep_copy)
    except UserError:
        return {}
    filesystems = data.get("filesystems") if isinstance(data, dict) else None
    peaks = {}
    for name, spec in (filesystems or {}).items() if isinstance(filesystems, dict) else ():
        peak = spec.get("peak_GiBps") if isinstance(spec, dict) else None
        if isinstance(peak, (int, float)) and not isinstance(peak, bool) and math.isfinite(peak) and peak > 0:
            peaks[str(name)] = float(peak)
    return peaks


def ceilings_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per ceiling point's result, sorted by shape; each rate with its 95% interval from its rounds
    (`hardware.ceiling_ci`: <rate>_low, _high, _rounds, _se_log) and every round as JSON text (`rounds`)."""
    frame = pd.DataFrame.from_records([{**r, **round_columns(r, CEILING_RATES)} for r in rows])
    return frame.sort_values(["shape", "point_id"], ignore_index=True) if not frame.empty else frame


def by_shape(ceilings: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """shape key → the median of each ceiling rate over that shape's ceiling points, its 95% interval from all
    their rounds (`hardware.ceiling_ci.pooled`), the probe's cold-read method and I/O mode, its bytes per rank."""
    if ceilings.empty:
        return {}
    rates = [c for c in CEILING_RATES if c in ceilings]
    out: dict[str, dict[str, Any]] = {}
    for key, g in ceilings.groupby("shape", sort=False):
        rows = g.to_dict("records")
        first = rows[0]
        out[str(key)] = {**{c: float(g[c].median()) for c in rates}, **pooled(rows, rates),
                         **{c: first.get(c) for c in PROBE_FACTS}}
    return out


def _heaviest(r: pd.DataFrame, by_checkpoint: Any) -> pd.DataFrame:
    """Per checkpoint: the heaviest rank's bytes, and its bytes and its time over the mean of the ranks that moved
    bytes (does its time follow its bytes?)."""
    heavy = r.loc[by_checkpoint["bytes"].idxmax()].set_index(CHECKPOINT)
    means = by_checkpoint[["bytes", "duration_s"]].mean()
    return pd.DataFrame({"bytes_per_rank_max": heavy["bytes"],
                         "heaviest_bytes_over_movers": heavy["bytes"] / means["bytes"],
                         "heaviest_time_over_mean": heavy["duration_s"] / means["duration_s"]})


def rank_intervals(slowest: pd.DataFrame, heaviest: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per cell × phase, the 95% intervals the per-rank rules decide on, over the cell's checkpoints (each one
    observation: its ranks measured side by side, so what a run shares, its node and the disk's state, weighs on
    them alike): the heaviest rank's time over the movers' mean, a ratio, Student t over its logarithms (as
    `tdist.log_interval`); the slowest rank's share of time in per-file calls (open + close, and with fsync), a
    mean of shares, Student t as it is (as `stats.describe`) and held to [0, 1]. Both figures are means over the
    checkpoints, so Student t fits them; no bootstrap is needed. rank_checkpoints counts them. Grouped, not per cell
    in Python: a collect of thousands of cells pays for it once."""
    calls = slowest["open_share"] + slowest["close_share"]
    out = {"rank_checkpoints": calls.groupby([slowest[k] for k in keys], sort=False).size()}
    for name, values in (("calls_share", calls), ("calls_fsync_share", calls + slowest["fsync_share"])):
        low, high = _t_interval(values, [slowest[k] for k in keys])
        out.update({f"{name}_low": low.clip(0, 1), f"{name}_high": high.clip(0, 1)})
    ratio = heaviest["heaviest_time_over_mean"]
    logs = np.log(ratio.where(np.isfinite(ratio) & (ratio > 0)))
    low, high = _t_interval(logs, [heaviest[k] for k in keys])
    out.update({"heaviest_time_low": np.exp(low), "heaviest_time_high": np.exp(high)})
    return pd.DataFrame(out).rename_axis(keys)


def _t_interval(values: pd.Series, by: list[pd.Series]) -> tuple[pd.Series, pd.Series]:
    """Per group, the mean ± `tdist.half_width` (NaN below two values)."""
    g = values.groupby(by, sort=False)
    n, mean, sd = g.count(), g.mean(), g.std()
    half = pd.Series([half_width(int(k), float(s)) for k, s in zip(n, sd, strict=True)], index=n.index, dtype=float)
    return mean - half, mean + half


def split_summary(ranks: pd.DataFrame, checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Per cell_key × phase: the slowest rank's and the mean rank's share of time per part, its files, and
    bytes per rank (max over ranks, mean over all ranks: world size), averaged over checkpoints."""
    if ranks.empty or checkpoints.empty or "cell_key" not in checkpoints:
        return pd.DataFrame()
    r = ranks.copy()
    shares = {f"{p}_share": r[f"{p}_s"] / r["duration_s"] for p in PARTS}
    r = r.assign(**shares)
    by_checkpoint = r.groupby(CHECKPOINT, sort=False)
    slowest = r.loc[by_checkpoint["duration_s"].idxmax()]
    keys = ["cell_key", "phase"]
    out = slowest.groupby(keys)[[*shares, "files"]].mean().add_prefix("slowest_")
    out = out.join(r.groupby(keys)[list(shares)].mean().add_prefix("mean_"))
    cp = checkpoints.set_index(CHECKPOINT)
    per = pd.DataFrame({"cell_key": cp["cell_key"], "files": cp["files"],
                        "bytes_per_rank_mean": cp["bytes"] / cp["world_size"]}).join(_heaviest(r, by_checkpoint))
    measures = ["files", "bytes_per_rank_mean", "bytes_per_rank_max", "heaviest_time_over_mean",
                "heaviest_bytes_over_movers"]
    out = out.join(per.reset_index().groupby(keys)[measures].mean())
    out = out.join(rank_intervals(slowest, per.reset_index(), keys))
    out["bytes_max_over_mean"] = out["bytes_per_rank_max"] / out["bytes_per_rank_mean"]
    if "heavy_rank_files" in checkpoints:
        out = out.join(checkpoints.groupby(keys)["heavy_rank_files"].first())
    return out.reset_index()


def _strategy_facts(training: pd.DataFrame) -> pd.DataFrame:
    """Per cell_key: means of the broadcast and blocking figures (what the network and memory rules read)."""
    cols = [c for c in ("blocking_s", "broadcast_s", "broadcast_bytes", "restore_s", *ENGINE_SPLIT) if c in training]
    if training.empty or "cell_key" not in training or not cols:
        return pd.DataFrame()
    return training.groupby("cell_key")[cols].mean()


def _get(d: dict[str, Any], key: str) -> float:
    v: Any = d.get(key)
    return float("nan") if missing(v) else float(v)


def _ratio(a: float, b: float) -> float:
    return a / b if b == b and b > 0 else float("nan")


def cell_facts(row: dict[str, Any], ceiling: dict[str, Any], strategy: dict[str, Any],
               engine: dict[str, Any] | None = None) -> CellFacts:
    """The rules' view of one summary row (with `phase_ceiling`'s columns and its residency sample), its like
    ceiling (`hardware.ceiling_match.like_ceiling`), its strategy figures and its engine's (`engine_facts`)."""
    phase = str(row["phase"])
    bytes_max = _get(row, "bytes_per_rank_max")
    eng = engine or {}
    return CellFacts(
        engine=engine_of(row), device="cpu" if missing(row.get("device")) else str(row["device"]),
        framework_share=_get(eng, "framework_share"), framework_share_low=_get(eng, "framework_share_low"),
        framework_share_high=_get(eng, "framework_share_high"), framework_basis=eng.get("framework_basis"),
        framework_note=eng.get("framework_note"), stream_GiBps=_get(eng, "stream_GiBps"),
        phase=phase, GiBps=_get(row, HEADLINE), GiBps_low=_get(row, f"{HEADLINE}_ci95_low"),
        GiBps_high=_get(row, f"{HEADLINE}_ci95_high"), n=count(row.get("n")),
        ceiling_GiBps=_opt(row, "ceiling_GiBps"), ceiling_low=_get(row, "ceiling_GiBps_low"),
        ceiling_high=_get(row, "ceiling_GiBps_high"), ceiling_rounds=count(row.get("ceiling_rounds")),
        share_low=_get(row, "ceiling_share_low"), share_high=_get(row, "ceiling_share_high"),
        ceiling_method=None if missing(row.get("ceiling_method")) else str(row["ceiling_method"]),
        ceiling_note=None if missing(row.get("ceiling_note")) else str(row["ceiling_note"]),
        even_ceiling_GiBps=_opt(row, "even_ceiling_GiBps"), even_share_low=_get(row, "even_ceiling_share_low"),
        even_share_high=_get(row, "even_ceiling_share_high"),
        probe_bytes_per_rank=_probe_bytes(ceiling), world_size=count(row.get("world_size")),
        # on a memory filesystem every page is resident by construction: no evidence of a warm read
        resident_pages_before=math.nan if reads_memory(row) else _get(row, "resident_pages_before"),
        pages_sampled=math.nan if reads_memory(row) else _get(row, "pages_sampled"),
        io_mode_used=str(row.get("io_mode_used") or row.get("io_mode")), fsync=row.get("fsync") is not False,
        cold_read_method=str(row.get("cold_read_method")), strategy=str(row.get("strategy") or "sync"),
        restore=str(row.get("restore") or "rank"), bytes_max_over_mean=_get(row, "bytes_max_over_mean"),
        heavy_rank_files=None if missing(row.get("heavy_rank_files")) else str(row["heavy_rank_files"]),
        heaviest_bytes_over_movers=_get(row, "heaviest_bytes_over_movers"),
        heaviest_time_over_mean=_get(row, "heaviest_time_over_mean"), heaviest_time_low=_get(row, "heaviest_time_low"),
        heaviest_time_high=_get(row, "heaviest_time_high"), rank_checkpoints=count(row.get("rank_checkpoints")),
        files=_get(row, "files"), slowest_files=_get(row, "slowest_files"),
        bytes_per_file=_ratio(_get(row, "bytes"), _get(row, "files")),
        slowest_open_share=_get(row, "slowest_open_share"), slowest_fsync_share=_get(row, "slowest_fsync_share"),
        slowest_close_share=_get(row, "slowest_close_share"),
        **{f: _get(row, f) for f in ("calls_share_low", "calls_share_high", "calls_fsync_share_low",
                                     "calls_fsync_share_high")},
        broadcast_GiBps=_ratio(_get(strategy, "broadcast_bytes") / GIB, _get(strategy, "broadcast_s")),
        broadcast_time_share=_ratio(_get(strategy, "broadcast_s"), _get(strategy, "restore_s")),
        bcast_ceiling_GiBps=ceiling.get("network_bcast_GiBps"),
        snapshot_GiBps_per_rank=_ratio(bytes_max / GIB, _get(strategy, "blocking_s")),
        memcpy_ceiling_GiBps_per_rank=ceiling.get("memcpy_GiBps_per_rank"))


def _probe_bytes(ceiling: dict[str, Any]) -> float:
    """What each rank's probe file held: as far as the probe streamed, else (older results) the largest shard."""
    streamed = _get(ceiling, "streamed_bytes_per_rank")
    return streamed if streamed > 0 else _get(ceiling, "largest_shard_bytes")


def _opt(d: dict[str, Any], key: str) -> float | None:
    v: Any = d.get(key)
    return None if missing(v) else float(v)


def engine_facts(row: dict[str, Any], twins: dict[tuple[str, str], dict[str, Any]], strategy: dict[str, Any]
                 ) -> dict[str, Any]:
    """An engine cell's stream twin (TWIN_COLUMNS) and its framework's share (`analysis.engines`): from the twin,
    else from the engine's time inside storage calls (the training table's per-point means, `strategy`)."""
    phase = str(row["phase"])
    twin = twins.get((str(row.get("cell_key")), phase), {})
    inside = _ratio(_get(strategy, f"engine_{phase}_storage_s"), _get(strategy, f"engine_{phase}_s"))
    return {**{c: twin.get(c, float("nan")) for c in TWIN_COLUMNS}, **framework_share(engine_of(row), twin, inside)}


def _hardware_row(row: dict[str, Any], shapes: dict[str, dict[str, Any]], strategy: pd.DataFrame,
                  peaks: dict[str, float], twins: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    ceiling, note = like_ceiling(row, shapes)
    measured = {**phase_ceiling(row, ceiling), "ceiling_note": note}
    strat = strategy.loc[row["cell_key"]].to_dict() if row.get("cell_key") in strategy.index else {}
    engine = engine_facts(row, twins, strat)
    facts = cell_facts({**row, **measured}, ceiling, strat, engine)
    verdict = name_limit(facts)
    peak = peaks.get(str(row.get("filesystem")))
    on_one_machine = bool(row.get("simulated_nodes")) and int(row.get("nodes") or 1) > 1 and bool(ceiling)
    return {"shape": shape_key(row), **measured, "ceiling_share": facts.share, "even_ceiling_share": facts.even_share,
            "peak_GiBps": peak, "peak_share": _ratio(facts.GiBps, peak or float("nan")),
            "limit": verdict.limit, "limit_evidence": verdict.evidence,
            "limit_caveat": SIMULATED_CEILING if on_one_machine else None, **engine}


def add_hardware(summary: pd.DataFrame, ranks: pd.DataFrame, checkpoints: pd.DataFrame, training: pd.DataFrame,
                 ceilings: pd.DataFrame, peaks: dict[str, float]) -> pd.DataFrame:
    """The summary with the columns named in this module's docstring."""
    if summary.empty:
        return summary
    split = split_summary(ranks, checkpoints)
    out = summary.merge(split, on=["cell_key", "phase"], how="left") if not split.empty else summary.copy()
    out = out.merge(residency(checkpoints), on=["cell_key", "phase"], how="left")
    shapes, strategy = by_shape(ceilings), _strategy_facts(training)
    twins = {(str(r["cell_key"]), str(r["phase"])): r for r in stream_twins(summary).to_dict("records")}
    added = [_hardware_row(r, shapes, strategy, peaks, twins) for r in out.to_dict("records")]
    return pd.concat([out, pd.DataFrame.from_records(added, index=out.index)], axis=1)


# Beyond this many cell × phase rows, `collect` prints how many cells each limit binds instead of every cell.
MAX_LINES = 12


def share_lines(summary: pd.DataFrame, ceilings: pd.DataFrame, statuses: Sequence[PointStatus] | None = None,
                setting: str | None = None) -> list[str]:
    """What `collect` prints: the ceilings measured and the ceiling points that left none (`statuses`, the
    ledger's; `setting`, the sweep's `ceilings:`); per cell × phase its share of the ceiling and its limit (the
    counts per limit for many cells)."""
    if summary.empty or "limit" not in summary:
        return []
    shapes = ceilings["shape"].nunique() if not ceilings.empty else 0
    if not shapes:
        return [no_ceiling_line(statuses, setting)]
    head = [f"ceilings of {shapes} resource shape(s) from {len(ceilings)} ceiling point(s)",
            *gap_lines(statuses, set(ceilings["point_id"]))]
    if len(summary) > MAX_LINES:
        counts = summary["limit"].value_counts()
        told = ", ".join(f"{limit} {n}" for limit, n in counts.items())
        return [*head, f"limits over {len(summary)} cell×phase rows: {told} (each with its evidence: the report)"]
    axes = independent(summary, varying(summary, ("phase", *DERIVED)))
    lines = head
    for r in sorted(summary.to_dict("records"), key=lambda r: r["phase"] != "write"):
        share = "no ceiling" if missing(r["ceiling_share"]) else \
            f"{pct_ci(r['ceiling_share'], _get(r, 'ceiling_share_low'), _get(r, 'ceiling_share_high'))} of the ceiling"
        where = f"{describe_cell(r, axes)}, " if axes else ""
        cell = rate_ci(r[HEADLINE], _get(r, f"{HEADLINE}_ci95_low"), _get(r, f"{HEADLINE}_ci95_high"))
        lines.append(f"{where}{r['phase']}: {cell}, {share} — "
                     f"{r['limit']}: {r['limit_evidence']}")
    return lines
