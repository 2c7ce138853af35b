"""Result files → tidy tables (pandas), incrementally.

Tables (units in column names), written as CSV and Parquet under `results/<study>/tables/`:
  checkpoints  one row per point × phase × checkpoint (the observations)
  points       one row per point × phase: the point's mean over its checkpoints (one repetition)
  summary      one row per cell (point minus repetition) × phase: statistics over repetitions
  ranks        one row per point × phase × checkpoint × rank (stragglers)
Parsed files are cached by path, size and mtime, so re-collecting reads only what changed.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from studyctl.fsutil import atomic_write_bytes
from studyctl.stats import describe
from worker.result import Result

CACHE_VERSION = 1
CELL_COLUMNS = ["tool", "model", "zero_stage", "tensor_parallel", "pipeline_parallel", "nodes", "ranks_per_node",
                "world_size", "filesystem", "io_mode", "scale", "block_bytes", "cold_read_method", "restore_mode"]
ATTEMPT_DIR = re.compile(r"attempt-(\d+)$")


@dataclass
class Problem:
    point_id: str
    attempt: int | None
    path: str
    reason: str


@dataclass
class Tables:
    checkpoints: pd.DataFrame
    points: pd.DataFrame
    summary: pd.DataFrame
    ranks: pd.DataFrame
    problems: list[Problem] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # point_id → small provenance record
    files_read: int = 0
    files_cached: int = 0


def _rows_from_result(r: Result, path: Path) -> dict[str, Any]:
    """Everything the tables need from one result, as plain lists of dicts (cheap to cache)."""
    p = r.point
    base = {
        "tool": "studyctl", "study": r.study, "point_id": r.point_id, "attempt": r.attempt,
        "cell_key": p.cell_key, "model": p.model.name, "zero_stage": p.zero_stage,
        "tensor_parallel": p.tensor_parallel, "pipeline_parallel": p.pipeline_parallel,
        "data_parallel": p.data_parallel, "nodes": p.nodes, "ranks_per_node": p.ranks_per_node,
        "world_size": p.world_size, "filesystem": p.filesystem, "io_mode": p.io_mode,
        "io_mode_used": r.io.io_mode_used, "repetition": p.repetition, "scale": r.sizes.scale,
        "block_bytes": r.io.block_bytes, "cold_read_method": r.io.cold_read_method, "restore_mode": r.io.restore_mode,
        "nominal_checkpoint_bytes": r.sizes.nominal_checkpoint_bytes,
    }
    checkpoints, ranks = [], []
    for c in r.checkpoints:
        checkpoints.append({**base, "phase": c.phase, "index": c.index, "bytes": c.bytes, "files": c.files,
                            "duration_s": c.duration_max_s, "span_s": c.span_s, "aggregate_GiBps": c.aggregate_GiBps,
                            "rank_bandwidth_min_GiBps": c.rank_bandwidth_min_GiBps,
                            "rank_bandwidth_max_GiBps": c.rank_bandwidth_max_GiBps})
        for rk in c.ranks:
            if rk.bytes:
                ranks.append({"point_id": r.point_id, "cell_key": p.cell_key, "phase": c.phase, "index": c.index,
                              "rank": rk.rank, "host": rk.host, "bandwidth_GiBps": rk.bandwidth_GiBps,
                              "duration_s": rk.duration_s, "nodes": p.nodes, "model": p.model.name,
                              "zero_stage": p.zero_stage, "filesystem": p.filesystem, "io_mode": p.io_mode})
    prov = r.provenance
    info = {"point_id": r.point_id, "attempt": r.attempt, "path": str(path), "started_at": prov.started_at,
            "finished_at": prov.finished_at, "python": prov.python_version, "mpi4py": prov.mpi4py_version,
            "mpi_library": prov.mpi_library_version, "kernel": prov.kernel, "studyctl": prov.studyctl_version,
            "cluster": prov.slurm.cluster if prov.slurm else None, "nodes": ",".join(prov.node_names),
            "simulated_nodes": prov.simulated_nodes, "filesystem": r.filesystem.name, "fs_path": r.filesystem.path,
            "fstype": r.filesystem.fstype, "mount_point": r.filesystem.mount_point,
            "mount_options": r.filesystem.mount_options, "fs_source": r.filesystem.source}
    return {"checkpoints": checkpoints, "ranks": ranks, "info": info}


def find_result_files(study_dir: Path) -> dict[str, list[tuple[int, Path]]]:
    """point_id → [(attempt, result path)] for every attempt directory that holds a result file."""
    found: dict[str, list[tuple[int, Path]]] = {}
    points = study_dir / "points"
    if not points.is_dir():
        return found
    for point_dir in points.iterdir():
        for attempt_dir in point_dir.iterdir() if point_dir.is_dir() else ():
            m = ATTEMPT_DIR.search(attempt_dir.name)
            result = attempt_dir / "result.json"
            if m and result.exists():
                found.setdefault(point_dir.name, []).append((int(m.group(1)), result))
    return found


class _Cache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, tuple[int, int, Any]] = {}
        try:
            version, entries = pickle.loads(path.read_bytes())
            if version == CACHE_VERSION:
                self.entries = entries
        except (OSError, ValueError, pickle.UnpicklingError, EOFError, TypeError):
            pass
        self.dirty = False

    def get(self, path: Path) -> tuple[bool, Any]:
        st = path.stat()
        hit = self.entries.get(str(path))
        if hit and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            return True, hit[2]
        return False, (st.st_mtime_ns, st.st_size)

    def put(self, path: Path, stamp: tuple[int, int], value: Any) -> None:
        self.entries[str(path)] = (*stamp, value)
        self.dirty = True

    def save(self) -> None:
        if self.dirty:
            atomic_write_bytes(self.path, pickle.dumps((CACHE_VERSION, self.entries), protocol=pickle.HIGHEST_PROTOCOL))


def _parse(path: Path, point_id: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        text = path.read_bytes()
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    try:
        result = Result.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in err["loc"])
        if err["type"] == "json_invalid":
            return None, f"not valid JSON (truncated or corrupt): {err['msg']}"
        return None, f"does not match the result schema: {where}: {err['msg']}"
    if result.point_id != point_id:
        return None, f"holds point {result.point_id}, not {point_id}"
    return _rows_from_result(result, path), None


def load_rows(study_dir: Path, cache_path: Path) -> tuple[list[dict[str, Any]], list[Problem], int, int]:
    """Per point the newest attempt with a valid result; problems for the rest."""
    cache = _Cache(cache_path)
    chosen: list[dict[str, Any]] = []
    problems: list[Problem] = []
    read = cached = 0
    for point_id, attempts in sorted(find_result_files(study_dir).items()):
        for attempt, path in sorted(attempts, reverse=True):
            hit, value = cache.get(path)
            if hit:
                cached += 1
                rows, error = value
            else:
                read += 1
                rows, error = _parse(path, point_id)
                cache.put(path, value, (rows, error))
            if rows is not None:
                chosen.append(rows)
                break
            problems.append(Problem(point_id, attempt, str(path), error or "invalid"))
    cache.save()
    return chosen, problems, read, cached


def _frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(list(rows))


def summarize_points(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """One row per point × phase: the mean over its checkpoints is one repetition's value."""
    if checkpoints.empty:
        return checkpoints
    keys = [c for c in checkpoints.columns if c not in ("index", "bytes", "files", "duration_s", "span_s",
                                                          "aggregate_GiBps", "rank_bandwidth_min_GiBps",
                                                          "rank_bandwidth_max_GiBps")]
    agg = checkpoints.groupby(keys, dropna=False, sort=False).agg(
        checkpoints=("index", "count"), bytes=("bytes", "first"), aggregate_GiBps=("aggregate_GiBps", "mean"),
        duration_s=("duration_s", "mean"), rank_bandwidth_min_GiBps=("rank_bandwidth_min_GiBps", "min"),
    ).reset_index()
    return agg


def summarize_cells(points: pd.DataFrame) -> pd.DataFrame:
    """Statistics over repetitions per cell and phase, plus per-node bandwidth and scaling efficiency."""
    if points.empty:
        return points
    group_cols = [c for c in CELL_COLUMNS if c in points.columns] + ["phase"]
    records = []
    for key, g in points.groupby(group_cols, dropna=False, sort=True):
        rec = dict(zip(group_cols, key if isinstance(key, tuple) else (key,), strict=True))
        bw = describe(g["aggregate_GiBps"].tolist())
        du = describe(g["duration_s"].tolist())
        rec.update(cell_key=g["cell_key"].iloc[0] if "cell_key" in g else None, n=bw["n"],
                   bytes=int(g["bytes"].iloc[0]),
                   **{f"aggregate_GiBps_{k}": v for k, v in bw.items() if k != "n"},
                   **{f"duration_s_{k}": v for k, v in du.items() if k != "n"},
                   point_ids=",".join(sorted(g["point_id"].astype(str))))
        rec["per_node_GiBps"] = rec["aggregate_GiBps_mean"] / rec["nodes"]
        records.append(rec)
    summary = pd.DataFrame.from_records(records)
    series_cols = [c for c in group_cols if c not in ("nodes", "world_size")]
    summary["scaling_efficiency"] = math.nan
    summary["baseline_nodes"] = pd.NA
    for _, g in summary.groupby(series_cols, dropna=False, sort=False):
        base = g.loc[g["nodes"].idxmin()]
        eff = g["per_node_GiBps"] / base["per_node_GiBps"] if base["per_node_GiBps"] else math.nan
        summary.loc[g.index, "scaling_efficiency"] = eff
        summary.loc[g.index, "baseline_nodes"] = int(base["nodes"])
    return summary


def build_tables(study_dir: Path, extra_checkpoints: pd.DataFrame | None = None) -> Tables:
    tables_dir = study_dir / "tables"
    rows, problems, read, cached = load_rows(study_dir, tables_dir / ".cache" / "results.pkl")
    checkpoints = _frame(c for r in rows for c in r["checkpoints"])
    if extra_checkpoints is not None and not extra_checkpoints.empty:
        checkpoints = pd.concat([checkpoints, extra_checkpoints], ignore_index=True)
    ranks = _frame(x for r in rows for x in r["ranks"])
    points = summarize_points(checkpoints)
    summary = summarize_cells(points)
    return Tables(checkpoints, points, summary, ranks, problems, {r["info"]["point_id"]: r["info"] for r in rows},
                  read, cached)


def write_tables(tables: Tables, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("checkpoints", "points", "summary", "ranks"):
        frame: pd.DataFrame = getattr(tables, name)
        for suffix in (".csv", ".parquet"):
            path = out_dir / f"{name}{suffix}"
            tmp = path.with_name(f".{path.name}.tmp")
            if suffix == ".csv":
                frame.to_csv(tmp, index=False)
            else:
                frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object}).to_parquet(
                    tmp, index=False)
            tmp.replace(path)
            written.append(path)
    problems = out_dir / "problems.json"
    problems.write_text(json.dumps([p.__dict__ for p in tables.problems], indent=1))
    return written
