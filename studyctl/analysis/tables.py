"""Result files → tidy tables (pandas), incrementally: find, validate against `Result`, cache, tabulate.

Tables (units in column names), written as CSV and Parquet under `results/<study>/tables/`:
  checkpoints  one row per point × phase × checkpoint: the observations
  points       one row per point × phase: the mean over its checkpoints (one repetition's value)
  summary      one row per cell (point minus repetition) × phase: statistics over repetitions
  ranks        one row per point × phase × checkpoint × rank that moved bytes (stragglers)

Why statistics over repetitions and not over checkpoints: the checkpoints of one run share a job,
nodes and cache state, so they are not independent samples; repetitions are.
Parsed files are cached by path, size and mtime, so re-collecting validates only what changed.
"""

from __future__ import annotations

import math
import os
import pickle
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from studyctl.analysis.stats import describe
from studyctl.analysis.training_cost import load_training, strategy_rows, training_table
from studyctl.fsutil import atomic_write_bytes, atomic_write_json
from worker.result import Result, WorkerError

CACHE_VERSION = 3
ATTEMPT_DIR = re.compile(r"^attempt-(\d+)$")
# What makes a cell: the point's configuration minus its repetition (plus how it was measured).
CELL_COLUMNS = ["tool", "model", "zero_stage", "tensor_parallel", "pipeline_parallel", "nodes",
                "ranks_per_node", "world_size", "filesystem", "io_mode", "scale", "block_bytes",
                "cold_read_method", "restore_mode", "strategy"]
# A series: a cell minus its node count; scaling efficiency compares along it.
SERIES_DROP = ("nodes", "world_size")
MEASURES = ("index", "bytes", "files", "duration_s", "span_s", "aggregate_GiBps", "rank_bandwidth_min_GiBps",
            "rank_bandwidth_max_GiBps")
TABLE_NAMES = ("checkpoints", "points", "summary", "ranks", "training")


@dataclass
class Problem:
    """A result file that could not be used (or a result that should exist and does not)."""

    point_id: str
    attempt: int | None
    path: str
    reason: str


@dataclass
class Failure:
    """A worker error record (error.json) on the point's latest attempt with no usable result."""

    point_id: str
    attempt: int
    failure_class: str
    reason: str


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
    training: pd.DataFrame = field(default_factory=pd.DataFrame)  # per point: what checkpoints cost training


# ------------------------------------------------------------------ finding files
@dataclass
class AttemptFiles:
    attempt: int
    result: Path | None
    error: Path | None


def find_attempts(study_dir: Path) -> dict[str, list[AttemptFiles]]:
    """point_id → its attempts (newest first) that left a result.json or error.json."""
    found: dict[str, list[AttemptFiles]] = {}
    points = study_dir / "points"
    try:
        point_entries = list(os.scandir(points))
    except OSError:
        return found
    for pe in point_entries:
        if not pe.is_dir():
            continue
        attempts = []
        with os.scandir(pe.path) as it:
            for ae in it:
                m = ATTEMPT_DIR.match(ae.name)
                if not m or not ae.is_dir():
                    continue
                names = set(os.listdir(ae.path))
                result = Path(ae.path, "result.json") if "result.json" in names else None
                error = Path(ae.path, "error.json") if "error.json" in names else None
                if result or error:
                    attempts.append(AttemptFiles(int(m.group(1)), result, error))
        if attempts:
            found[pe.name] = sorted(attempts, key=lambda a: a.attempt, reverse=True)
    return found


# ------------------------------------------------------------------ parsing, cached
def _rows_from_result(r: Result, path: Path) -> dict[str, Any]:
    """Everything the tables need from one result, as plain lists of dicts (cheap to pickle)."""
    p = r.point
    base = {
        "tool": "studyctl", "study": r.study, "point_id": r.point_id, "attempt": r.attempt,
        "cell_key": p.cell_key, "model": p.model.name, "zero_stage": p.zero_stage,
        "tensor_parallel": p.tensor_parallel, "pipeline_parallel": p.pipeline_parallel,
        "data_parallel": p.data_parallel, "nodes": p.nodes, "ranks_per_node": p.ranks_per_node,
        "world_size": p.world_size, "filesystem": p.filesystem, "io_mode": io_label(p.io_mode, r.io.fsync_per_file),
        "io_mode_used": r.io.io_mode_used, "repetition": p.repetition, "scale": r.sizes.scale,
        "block_bytes": r.io.block_bytes, "cold_read_method": r.io.cold_read_method,
        "restore_mode": r.io.restore_mode, "nominal_checkpoint_bytes": r.sizes.nominal_checkpoint_bytes,
        "strategy": r.strategy.strategy if r.strategy else "sync",
    }
    checkpoints, ranks = [], []
    for c in r.checkpoints:
        checkpoints.append({**base, "phase": c.phase, "index": c.index, "bytes": c.bytes, "files": c.files,
                            "duration_s": c.duration_max_s, "span_s": c.span_s,
                            "aggregate_GiBps": c.aggregate_GiBps,
                            "rank_bandwidth_min_GiBps": c.rank_bandwidth_min_GiBps,
                            "rank_bandwidth_max_GiBps": c.rank_bandwidth_max_GiBps})
        for rk in c.ranks:
            if rk.bytes:
                ranks.append((c.phase, c.index, rk.rank, rk.host, rk.bytes, rk.duration_s,
                              rk.bandwidth_GiBps))
    prov, fs = r.provenance, r.filesystem
    info = {"point_id": r.point_id, "attempt": r.attempt, "path": str(path), "started_at": prov.started_at,
            "finished_at": prov.finished_at, "python": prov.python_version, "mpi4py": prov.mpi4py_version,
            "mpi_library": prov.mpi_library_version, "kernel": prov.kernel, "studyctl": prov.studyctl_version,
            "cluster": prov.slurm.cluster if prov.slurm else None,
            "partition": prov.slurm.partition if prov.slurm else None,
            "node_names": ",".join(prov.node_names),
            "simulated_nodes": prov.simulated_nodes, "filesystem": fs.name, "fs_path": fs.path,
            "fstype": fs.fstype, "mount_point": fs.mount_point, "mount_options": fs.mount_options,
            "fs_source": fs.source, "fs_total_bytes": fs.total_bytes}
    return {"checkpoints": checkpoints, "ranks": ranks, "info": info, "training": strategy_rows(r, base)}


def io_label(io_mode: str, fsync: bool) -> str:
    """The I/O mode as every table, plot and report shows it: a point that never fsynced says so."""
    return io_mode if fsync else f"{io_mode}, no fsync"


RANK_FIELDS = ("phase", "index", "rank", "host", "bytes", "duration_s", "bandwidth_GiBps")
RANK_CONTEXT = ("point_id", "cell_key", "model", "zero_stage", "nodes", "filesystem", "io_mode", "repetition")


def _describe_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    err = errors[0]
    if err["type"] == "json_invalid":
        return f"not valid JSON (truncated or corrupt): {err['msg']}"
    where = ".".join(str(x) for x in err["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"does not match the result schema: {where}: {err['msg']}{more}"


def parse_result(path: Path, point_id: str) -> tuple[dict[str, Any] | None, str | None]:
    """(rows, None) for a valid result of this point, else (None, one-line reason)."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if not text.strip():
        return None, "empty file"
    try:
        result = Result.model_validate_json(text)
    except ValidationError as exc:
        return None, _describe_error(exc)
    if result.point_id != point_id:
        return None, f"holds point {result.point_id}, not {point_id}"
    if result.point.point_id != point_id:
        return None, f"its point configuration hashes to {result.point.point_id}, not {point_id}"
    return _rows_from_result(result, path), None


def parse_error(path: Path) -> tuple[str, str]:
    """(failure class, reason) from a worker error record; tolerant, since it only explains a failure."""
    try:
        err = WorkerError.model_validate_json(path.read_bytes())
        return err.failure_class, err.reason
    except (OSError, ValidationError) as exc:
        return "unknown", f"error.json unreadable or invalid ({type(exc).__name__})"


class ParseCache:
    """path → (mtime_ns, size, parsed value), pickled under tables/.cache."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, tuple[int, int, Any]] = {}
        try:
            version, entries = pickle.loads(path.read_bytes())
            if version == CACHE_VERSION:
                self.entries = entries
        except (OSError, ValueError, pickle.UnpicklingError, EOFError, TypeError, AttributeError):
            pass
        self.used: set[str] = set()
        self.dirty = False
        self.hits = self.misses = 0

    def get_or_parse(self, path: Path, parse: Callable[..., Any], *args: Any) -> Any:
        key = str(path)
        st = path.stat()
        self.used.add(key)
        hit = self.entries.get(key)
        if hit and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            self.hits += 1
            return hit[2]
        self.misses += 1
        value = parse(path, *args)
        self.entries[key] = (st.st_mtime_ns, st.st_size, value)
        self.dirty = True
        return value

    def save(self) -> None:
        stale = set(self.entries) - self.used
        for key in stale:  # files that disappeared: keep the cache no larger than the study
            del self.entries[key]
        if self.dirty or stale:
            atomic_write_bytes(self.path, pickle.dumps((CACHE_VERSION, self.entries),
                                                       protocol=pickle.HIGHEST_PROTOCOL))


def load_rows(study_dir: Path, cache_path: Path
              ) -> tuple[list[dict[str, Any]], list[Problem], list[Failure], int, int]:
    """Per point the newest attempt with a valid result; problems for newer invalid ones; failures."""
    cache = ParseCache(cache_path)
    chosen: list[dict[str, Any]] = []
    problems: list[Problem] = []
    failures: list[Failure] = []
    for point_id, attempts in sorted(find_attempts(study_dir).items()):
        picked = False
        for a in attempts:
            if a.result is None:
                continue
            path = a.result
            rows, error = cache.get_or_parse(path, parse_result, point_id)
            if rows is not None:
                chosen.append(rows)
                picked = True
                break
            problems.append(Problem(point_id, a.attempt, str(path), error or "invalid"))
        if not picked and attempts[0].error is not None:
            path = attempts[0].error
            cls, reason = cache.get_or_parse(path, parse_error)
            failures.append(Failure(point_id, attempts[0].attempt, cls, reason))
    cache.save()
    return chosen, problems, failures, cache.misses, cache.hits


# ------------------------------------------------------------------ tabulating
def summarize_points(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """One row per point × phase: the mean over its checkpoints is one repetition's value."""
    if checkpoints.empty:
        return checkpoints.copy()
    keys = ["point_id", "phase"]
    config = [c for c in checkpoints.columns if c not in MEASURES and c not in keys]
    grouped = checkpoints.groupby(keys, sort=False, dropna=False)
    agg = grouped.agg(checkpoints=("index", "count"), bytes=("bytes", "first"),
                      aggregate_GiBps=("aggregate_GiBps", "mean"),
                      aggregate_GiBps_checkpoint_stdev=("aggregate_GiBps", "std"),
                      duration_s=("duration_s", "mean"), duration_max_s=("duration_s", "max"),
                      rank_bandwidth_min_GiBps=("rank_bandwidth_min_GiBps", "min"))
    first = grouped[config].first()
    return first.join(agg).reset_index()[[*config, *keys, *agg.columns]]


def summarize_cells(points: pd.DataFrame) -> pd.DataFrame:
    """Statistics over repetitions per cell × phase, per-node bandwidth, scaling efficiency."""
    if points.empty:
        return pd.DataFrame()
    group_cols = [c for c in CELL_COLUMNS if c in points.columns] + ["phase"]
    records = []
    for key, g in points.groupby(group_cols, dropna=False, sort=True):
        rec = dict(zip(group_cols, key, strict=True))
        bw = describe(g["aggregate_GiBps"].tolist())
        du = describe(g["duration_s"].tolist())
        rec.update(cell_key=g["cell_key"].iloc[0], n=bw["n"], checkpoints=int(g["checkpoints"].sum()),
                   bytes=int(g["bytes"].iloc[0]),
                   **{f"aggregate_GiBps_{k}": v for k, v in bw.items() if k != "n"},
                   **{f"duration_s_{k}": v for k, v in du.items() if k != "n"},
                   attempts_max=int(g["attempt"].max()),
                   point_ids=",".join(sorted(g["point_id"].astype(str))))
        rec["per_node_GiBps"] = rec["aggregate_GiBps_mean"] / rec["nodes"]
        records.append(rec)
    summary = pd.DataFrame.from_records(records)
    return add_scaling_efficiency(summary, [c for c in group_cols if c not in SERIES_DROP])


def add_scaling_efficiency(summary: pd.DataFrame, series_cols: list[str]) -> pd.DataFrame:
    """Per-node bandwidth relative to the series' smallest node count (1.0 = perfect scaling)."""
    summary = summary.copy()
    summary["baseline_nodes"] = 0
    summary["scaling_efficiency"] = math.nan
    for _, g in summary.groupby(series_cols, dropna=False, sort=False):
        base = g.loc[g["nodes"].idxmin()]
        summary.loc[g.index, "baseline_nodes"] = int(base["nodes"])
        if base["per_node_GiBps"] > 0:
            summary.loc[g.index, "scaling_efficiency"] = g["per_node_GiBps"] / base["per_node_GiBps"]
    return summary


def _ranks_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    records = []
    for r in rows:
        if not r["ranks"]:
            continue
        first = r["checkpoints"][0]
        context = tuple(first[c] for c in RANK_CONTEXT)
        records.extend(context + t for t in r["ranks"])
    return pd.DataFrame.from_records(records, columns=[*RANK_CONTEXT, *RANK_FIELDS])


def build_tables(study_dir: Path, extra_checkpoints: pd.DataFrame | None = None,
                 cache_dir: Path | None = None) -> Tables:
    """All four tables from the study's result files (plus imported rows, e.g. DLIO's)."""
    cache = (cache_dir or study_dir / "tables" / ".cache") / "results.pkl"
    rows, problems, failures, read, cached = load_rows(study_dir, cache)
    checkpoints = pd.DataFrame.from_records([c for r in rows for c in r["checkpoints"]])
    if extra_checkpoints is not None and not extra_checkpoints.empty:
        parts = [checkpoints, extra_checkpoints] if not checkpoints.empty else [extra_checkpoints]
        checkpoints = pd.concat(parts, ignore_index=True)
    points = summarize_points(checkpoints)
    summary = summarize_cells(points)
    training = training_table([t for r in rows for t in r["training"]], load_training(study_dir))
    return Tables(checkpoints, points, summary, _ranks_frame(rows), problems, failures,
                  {r["info"]["point_id"]: r["info"] for r in rows}, read, cached, training)


def _atomic_frame(frame: pd.DataFrame, paths: list[Path]) -> None:
    """One Arrow table, written as CSV and Parquet by pyarrow (pandas' CSV writer is 10× slower here)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    strings = {c: "string" for c in frame.columns if frame[c].dtype == object}
    table = pa.Table.from_pandas(frame.astype(strings) if strings else frame, preserve_index=False)
    for path in paths:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            if path.suffix == ".csv":
                pacsv.write_csv(table, tmp, pacsv.WriteOptions(quoting_style="needed"))
            else:
                pq.write_table(table, tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def write_tables(tables: Tables, out_dir: Path) -> list[Path]:
    """CSV and Parquet per table, plus problems.json; every file replaced atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in TABLE_NAMES:
        frame: pd.DataFrame = getattr(tables, name)
        paths = [out_dir / f"{name}.csv", out_dir / f"{name}.parquet"]
        _atomic_frame(frame, paths)
        written += paths
    atomic_write_json(out_dir / "problems.json", {"invalid_results": [asdict(p) for p in tables.problems],
                                                  "worker_errors": [asdict(f) for f in tables.failures]})
    return written
