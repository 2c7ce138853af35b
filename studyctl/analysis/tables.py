"""Rows from result files → tidy tables (pandas), units in column names.

The base tables, written as CSV and Parquet under `results/<study>/tables/` (`BASE_TABLES`; each topic declares
its own in `<topic>/outputs.py`, `analysis.outputs`):
  checkpoints  one row per point × phase × checkpoint: the observations (calibration runs too, by `role`)
  points       one row per measure point × phase: one repetition's figures over its checkpoints
  summary      one row per cell × phase: statistics over repetitions, adequacy flags
  ranks        one row per point × phase × checkpoint × rank that moved bytes (stragglers)

A cell is every setting except the repetition, plus what ran (`cells.IDENTITY`). Its headline
bandwidth is `bytes_over_time_GiBps`: total bytes / total time over all its checkpoints (time of a
checkpoint = last rank's end − first rank's start), 95% CI over repetitions; `mean_of_rates_GiBps`
(the mean of per-checkpoint rates, DLIO's way) stands beside it. Statistics are over repetitions,
not checkpoints: the checkpoints of one run share a job, nodes and cache state.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.adequacy import cell_flags
from studyctl.analysis.cells import DERIVED, HEADLINE, identity_columns
from studyctl.analysis.columns import RESIDENCY_COLUMNS
from studyctl.analysis.frame_cache import FrameSpec, point_frame
from studyctl.analysis.hardware.rank_load import SPLIT_FIELDS
from studyctl.analysis.hardware.table import add_hardware, ceilings_table, stated_peaks
from studyctl.analysis.output_memo import OutputMemo, table_digest
from studyctl.analysis.outputs import TableOutput, declared
from studyctl.analysis.projection.table import add_projections, fit_all, measured, point_factors
from studyctl.analysis.recovery.table import recovery_cells, recovery_table
from studyctl.analysis.results import (
    RANK_CONTEXT,
    RANK_FIELDS,
    REQUEST_COLUMNS,
    Failure,
    LoadedRows,
    Problem,
    load_rows,
    rank_rows,
)
from studyctl.analysis.stats import describe, total_over_total
from studyctl.analysis.training.cells import cost_cells, summary_flags
from studyctl.analysis.training.cost import load_training, training_table
from studyctl.analysis.values import missing
from studyctl.attempt.judged import judged
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.tree import AttemptFiles
from studyctl.fsutil import atomic_open, atomic_write_json, owned_dir
from studyctl.units import GIB

MEASURES = ("index", "bytes", "files", "duration_s", "span_s", "aggregate_GiBps", "mlperf_throughput_GiBps",
            "rank_bandwidth_min_GiBps", "rank_bandwidth_max_GiBps", "active_ranks", *REQUEST_COLUMNS,
            *RESIDENCY_COLUMNS)


@dataclass
class Tables:
    checkpoints: pd.DataFrame
    points: pd.DataFrame
    summary: pd.DataFrame
    ranks: pd.DataFrame
    problems: list[Problem] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)  # point_id → provenance of its result
    files_read: int = 0
    files_cached: int = 0
    left_out: list[str] = field(default_factory=list)  # points the sweep now excludes that left a result
    training: pd.DataFrame = field(default_factory=pd.DataFrame)  # per point: what checkpoints cost training
    training_cells: pd.DataFrame = field(default_factory=pd.DataFrame)  # the same per cell, 95% CIs and flags
    ceilings: pd.DataFrame = field(default_factory=pd.DataFrame)  # per ceiling point: its shape's ceilings
    recovery: pd.DataFrame = field(default_factory=pd.DataFrame)  # per point that restarted: time to first step
    recovery_cells: pd.DataFrame = field(default_factory=pd.DataFrame)  # the same per cell, 95% CIs and flags


def summarize_points(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """One row per point × phase: totals and means over its checkpoints (one repetition's figures)."""
    if checkpoints.empty:
        return checkpoints.copy()
    keys = ["point_id", "phase"]
    config = [c for c in checkpoints.columns if c not in MEASURES and c not in keys]
    grouped = checkpoints.groupby(keys, sort=False, dropna=False)
    agg = grouped.agg(checkpoints=("index", "count"), bytes=("bytes", "first"), total_bytes=("bytes", "sum"),
                      total_time_s=("span_s", "sum"), mean_of_rates_GiBps=("aggregate_GiBps", "mean"),
                      span_s=("span_s", "mean"), duration_s=("duration_s", "mean"),
                      duration_max_s=("duration_s", "max"),
                      mlperf_throughput_GiBps=("mlperf_throughput_GiBps", "mean"),
                      rank_bandwidth_min_GiBps=("rank_bandwidth_min_GiBps", "min"),
                      active_ranks=("active_ranks", "max"),
                      **{c: (c, "mean") for c in REQUEST_COLUMNS if c in checkpoints})  # per checkpoint (objects)
    agg.insert(0, HEADLINE, agg["total_bytes"] / GIB / agg["total_time_s"])
    first = grouped[config].first()
    return first.join(agg).reset_index()[[*config, *keys, *agg.columns]]


def _cell_record(key: tuple, group_cols: list[str], g: pd.DataFrame) -> dict[str, Any]:
    rec: dict[str, Any] = dict(zip(group_cols, key, strict=True))
    head = total_over_total((g["total_bytes"] / GIB).tolist(), g["total_time_s"].tolist())
    reps = describe(g[HEADLINE].tolist())
    rates = describe(g["mean_of_rates_GiBps"].tolist())
    du = describe(g["duration_s"].tolist())
    rec.update({
        "cell_key": g["cell_key"].iloc[0], "n": head["n"], "checkpoints": int(g["checkpoints"].sum()),
        HEADLINE: head["value"], f"{HEADLINE}_se": head["se"], f"{HEADLINE}_ci95": head["ci95"],
        f"{HEADLINE}_ci95_low": head["ci95_low"], f"{HEADLINE}_ci95_high": head["ci95_high"],
        f"{HEADLINE}_rep_stdev": reps["stdev"], f"{HEADLINE}_rep_min": reps["min"],
        f"{HEADLINE}_rep_max": reps["max"],
        "mean_of_rates_GiBps": (g["mean_of_rates_GiBps"] * g["checkpoints"]).sum() / g["checkpoints"].sum(),
        "mean_of_rates_GiBps_ci95": rates["ci95"],
        "duration_s_mean": du["mean"], "duration_s_ci95": du["ci95"], "span_s_mean": g["span_s"].mean(),
        "mlperf_throughput_GiBps_mean": g["mlperf_throughput_GiBps"].mean(),
        "rank_bandwidth_min_GiBps": g["rank_bandwidth_min_GiBps"].min(),
        "active_ranks": g["active_ranks"].max(), "bytes": int(g["bytes"].iloc[0]),
        "attempts_max": int(g["attempt"].max()), "point_ids": ",".join(sorted(g["point_id"].astype(str)))})
    rec.update({c: g[c].mean() for c in REQUEST_COLUMNS if c in g})  # an object store's, per checkpoint
    for col in (*DERIVED, "nominal_checkpoint_bytes", "written_checkpoint_bytes", "nominal_restore_bytes", "fstype",
                "tier_fstype"):
        if col in g.columns:
            rec[col] = g[col].iloc[0]
    rec["simulated_nodes"] = bool(g["simulated_nodes"].fillna(False).any()) if "simulated_nodes" in g else False
    rec["per_node_GiBps"] = rec[HEADLINE] / rec["nodes"] if rec.get("nodes") else float("nan")
    return rec


# What `phase_nominal_bytes` reads of a row.
NOMINAL_COLUMNS = ("phase", "bytes", "nominal_checkpoint_bytes", "written_checkpoint_bytes", "nominal_restore_bytes")


def phase_nominal_bytes(rec: dict[str, Any]) -> float | None:
    """What this phase moves at full size: the checkpoint for a write; for a restore its own nominal bytes (a full
    or broadcast restore moves more than one checkpoint), else its bytes scaled as the checkpoint was."""
    nominal, written = rec.get("nominal_checkpoint_bytes"), rec.get("written_checkpoint_bytes")
    if nominal is None or missing(nominal):
        return None
    if rec.get("phase") != "read":
        return float(nominal)
    if not missing(rec.get("nominal_restore_bytes")):
        return float(rec["nominal_restore_bytes"])
    return None if written is None or missing(written) or not written else float(rec["bytes"]) * nominal / written


def summarize_cells(points: pd.DataFrame) -> pd.DataFrame:
    """Statistics over repetitions per cell × phase, scaling efficiency and adequacy flags."""
    if points.empty:
        return pd.DataFrame()
    group_cols = [*identity_columns(points), "phase"]
    records = [_cell_record(key, group_cols, g)
               for key, g in points.groupby(group_cols, dropna=False, sort=True)]
    summary = add_scaling_efficiency(pd.DataFrame.from_records(records),
                                     [c for c in group_cols if c != "nodes"])
    summary["flags"] = ["; ".join(cell_flags(r)) for r in summary.to_dict("records")]
    return summary


def add_scaling_efficiency(summary: pd.DataFrame, series_cols: list[str]) -> pd.DataFrame:
    """Measured / ideal along each series (a cell minus its node count); on simulated nodes with a caveat.

    Ideal = the smallest node count's bandwidth × active ranks / its active ranks: it grows only where
    the number of ranks moving bytes grows with nodes (ZeRO-0 writers are fixed: its ideal is flat).
    """
    summary = summary.copy()
    summary["baseline_nodes"] = 0
    summary["ideal_GiBps"] = float("nan")
    if "active_ranks" not in summary:
        summary["active_ranks"] = summary["nodes"]
    for _, g in summary.groupby(series_cols, dropna=False, sort=False):
        base = g.loc[g["nodes"].idxmin()]
        summary.loc[g.index, "baseline_nodes"] = int(base["nodes"])
        active = g["active_ranks"].fillna(base["active_ranks"])
        summary.loc[g.index, "ideal_GiBps"] = base[HEADLINE] * active / base["active_ranks"]
    summary["scaling_efficiency"] = summary[HEADLINE] / summary["ideal_GiBps"]
    on_one_machine = summary["simulated_nodes"].fillna(False).astype(bool) if "simulated_nodes" in summary else False
    summary["scaling_efficiency_caveat"] = pd.Series(SIMULATED_EFFICIENCY, index=summary.index).where(
        on_one_machine & summary["scaling_efficiency"].notna())
    return summary


# What the efficiency of simulated nodes means, beside the figure in the tables and the report.
SIMULATED_EFFICIENCY = "simulated nodes: one machine, one disk (not a scaling measurement)"


def _column(values: Sequence[Any], none_is_nan: bool = False) -> Any:
    """The column pandas would infer from `values`, by numpy where every value is an int or every one a float
    (a third of the time for 500,000 ranks); anything else is left to pandas. `none_is_nan`: None is a figure not
    recorded (a float column)."""
    kinds = set(map(type, values))
    if none_is_nan and kinds <= {float, type(None)}:
        return np.array(values, dtype=float)
    if kinds == {int} or kinds == {float}:
        array = np.array(values)
        if array.dtype in (np.int64, np.float64):
            return array
    return list(values)


def _ranks_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per rank that moved bytes, built by column: each point's context once, repeated for its ranks
    (a tuple per rank of 500,000 was a second of a collect at 10,000 points)."""
    parsed = [(r, rank_rows(r)) for r in rows if r["rank_count"]]
    having = [(r, ranks) for r, ranks in parsed if ranks]
    if not having:
        return pd.DataFrame.from_records([], columns=[*RANK_CONTEXT, *RANK_FIELDS])
    counts = [len(ranks) for _, ranks in having]
    columns: dict[str, Any] = {
        c: pd.Series([r["checkpoints"][0][c] for r, _ in having]).repeat(counts).reset_index(drop=True)
        for c in RANK_CONTEXT}
    fields = zip(*(t for _, ranks in having for t in ranks), strict=True)  # by field at once
    columns.update({name: _column(values, name in SPLIT_FIELDS) for name, values in zip(RANK_FIELDS, fields,
                                                                                         strict=True)})
    return pd.DataFrame(columns)


def _checkpoints_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame.from_records([c for r in rows for c in r["checkpoints"]])


# The per-point frames, kept between collects under tables/.cache and patched by point (`frame_cache`).
CHECKPOINTS = FrameSpec("checkpoints", _checkpoints_frame, lambda r: int(r["checkpoint_count"]),
                        lambda r: [list(c) for c in r["checkpoints"]])
RANKS = FrameSpec("ranks", _ranks_frame, lambda r: int(r["rank_count"]))


def build_tables(study_dir: Path, extra_checkpoints: pd.DataFrame | None = None,
                 cache_dir: Path | None = None, excluded: frozenset[str] = frozenset(),
                 found: dict[str, list[AttemptFiles]] | None = None,
                 later: list[Callable[[], None]] | None = None) -> Tables:
    """All four tables from the study's result files (plus imported rows, e.g. DLIO's).

    Points the sweep copy does not judge (`attempt.judged`), and `excluded` (the ledger's view handed in), are
    not cells: a result they left from before is named in `left_out`. `found`: the attempt tree, if scanned.
    `later`: where the kept per-point frames' writes are handed (`frame_cache.point_frame`), else made now.
    """
    paths = StudyPaths(Path(study_dir))
    cache_dir = paths.tables_cache if cache_dir is None else cache_dir
    owned_dir(paths.root, cache_dir)  # the parse cache's home, and the kept frames'
    with cycles_unchecked():
        verdict = judged(paths)
        return _tables(paths, load_rows(paths, cache_dir, excluded | verdict.excluded, found, verdict),
                       extra_checkpoints, cache_dir, later)


@contextmanager
def cycles_unchecked() -> Iterator[None]:
    """The cycle collector paused: loading the rows makes millions of containers that all live until the tables
    are built, and it would walk them again and again (a quarter of a collect at 10,000 files). Rows hold no
    cycles; what they free is freed by reference counts."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _tables(paths: StudyPaths, loaded: LoadedRows, extra_checkpoints: pd.DataFrame | None, cache_dir: Path,
            later: list[Callable[[], None]] | None) -> Tables:
    checkpoints = point_frame(CHECKPOINTS, loaded.rows, loaded.stamps, cache_dir, paths.root, later, loaded.complete)
    if extra_checkpoints is not None and not extra_checkpoints.empty:
        parts = [checkpoints, extra_checkpoints] if not checkpoints.empty else [extra_checkpoints]
        checkpoints = pd.concat(parts, ignore_index=True)
    # every run feeds the projections' fit (`checkpoints` keeps them all, with their role); only measure points
    # are points and cells of the study (calibration points are the fit's, ceiling points the shape's)
    fits = fit_all(checkpoints)
    points = summarize_points(checkpoints[measured(checkpoints)].reset_index(drop=True))
    factors = point_factors(checkpoints, phase_nominal_bytes, fits, NOMINAL_COLUMNS)
    training = training_table([r["training"] for r in loaded.rows if r.get("training")],
                              load_training(paths.sweep_copy), factors)
    ranks = point_frame(RANKS, loaded.rows, loaded.stamps, cache_dir, paths.root, later, loaded.complete)
    ceilings = ceilings_table([r["ceiling"] for r in loaded.rows if r.get("ceiling")])
    summary = add_hardware(add_projections(summarize_cells(points), checkpoints, phase_nominal_bytes, fits), ranks,
                           checkpoints[measured(checkpoints)], training, ceilings, stated_peaks(paths.sweep_copy))
    recovery = recovery_table([r["recovery"] for r in loaded.rows if r.get("recovery")])
    return Tables(checkpoints, points, summary, ranks, loaded.problems, loaded.failures,
                  {r["info"]["point_id"]: r["info"] for r in loaded.rows}, loaded.files_read, loaded.files_cached,
                  loaded.left_out, training, cost_cells(training, summary_flags(summary)), ceilings, recovery,
                  recovery_cells(recovery))


def _atomic_frame(frame: pd.DataFrame, paths: list[Path], memo: OutputMemo | None = None) -> None:
    """One Arrow table, written as CSV and Parquet by pyarrow (pandas' CSV writer is 10× slower here); with a
    memo, files already holding this very table (and untouched since) are kept."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    strings = {c: "string" for c in frame.columns if frame[c].dtype == object}
    # one chunk per column: a frame spliced from kept and new rows (`frame_cache`) gives the same file and digest as
    # one built whole
    table = pa.Table.from_pandas(frame.astype(strings) if strings else frame, preserve_index=False).combine_chunks()
    if memo is not None:
        key = table_digest(paths[0].stem, table)
        if all([memo.kept(path, key) for path in paths]):  # a list: each path is asked (and remembered)
            return
    for path in paths:
        with atomic_open(path) as fh:
            if path.suffix == ".csv":
                pacsv.write_csv(table, fh, pacsv.WriteOptions(quoting_style="needed"))
            else:
                pq.write_table(table, fh)
        if memo is not None:
            memo.made(path)


def frame_files(out_dir: Path, name: str) -> list[Path]:
    return [out_dir / f"{name}.csv", out_dir / f"{name}.parquet"]


def write_frame(frame: pd.DataFrame, out_dir: Path, name: str, memo: OutputMemo | None = None) -> list[Path]:
    """`name`.csv and `name`.parquet in `out_dir` (an existing directory), each replaced atomically."""
    paths = frame_files(out_dir, name)
    _atomic_frame(frame, paths, memo)
    return paths


# The base tables, written before every topic's (`analysis.outputs`).
BASE_TABLES = tuple(TableOutput(name, attrgetter(name))
                    for name in ("checkpoints", "points", "summary", "ranks"))


def table_files(study: StudyPaths) -> dict[str, list[Path]]:
    """The files `write_tables` writes, by table name: known before they are written."""
    return {out.name: frame_files(study.tables, out.name) for out in declared("TABLES", BASE_TABLES)}


def write_tables(tables: Tables, study: StudyPaths, memo: OutputMemo | None = None) -> dict[str, list[Path]]:
    """CSV and Parquet per declared table (the base's, then each topic's), by name, plus problems.json; every file
    replaced atomically (or kept, with a memo, where it holds the same table); the memo is saved."""
    written = {out.name: write_frame(out.build(tables), study.tables, out.name, memo)
               for out in declared("TABLES", BASE_TABLES)}
    if memo is not None:
        memo.save()
    atomic_write_json(study.problems, {"invalid_results": [asdict(p) for p in tables.problems],
                                       "worker_errors": [asdict(f) for f in tables.failures]})
    return written
