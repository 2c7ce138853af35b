"""Import a DLIO benchmark run (summary.json + *per_epoch_stats.json) as rows of our checkpoints table.

DLIO's output (dlio_benchmark/utils/statscounter.py): rank 0 writes summary.json
(num_accelerators, num_hosts, metric.checkpoint_size_GB, metric.save_checkpoint_io_mean_GB_per_second,
...); every rank writes `<rank>_per_epoch_stats.json`: {epoch: {"save_ckpt<N>" | "load_ckpt<N>":
{start, end, duration, throughput}}}. Older DLIO wrote one rank-0 `per_epoch_stats.json` with
"ckpt<N>" (saves only, duration a string). DLIO's "GB" are GiB.

We measure DLIO's checkpoints our way where we can: over all ranks' records of a checkpoint,
duration = the slowest rank's, aggregate bandwidth = size / (last end − first start). Rows carry
tool = "dlio" and are labelled "DLIO, warm reads, no fsync" wherever they appear: DLIO restores right
after writing (page cache) and its fsync option is misspelled in its code, so it never syncs. Several
runs (e.g. a write invocation and a read invocation) are imported side by side; each is a repetition
of the cell its configuration names, and the report lists each folder with DLIO's own rank-0 figures
beside our recomputation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from studyctl.analysis.cells import cell_key
from studyctl.definition.yamlpos import load_yaml_bounded
from studyctl.errors import UserError
from studyctl.units import GIB

RECORD = re.compile(r"^(save_ckpt|load_ckpt|ckpt)(\d+)$")
RANK_FILE = re.compile(r"^(\d+)_per_epoch_stats\.json$")


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable DLIO JSON file ({exc})") from None


@dataclass
class DlioRun:
    """One imported DLIO output folder: DLIO's own summary figures beside ours from its per-rank files."""

    folder: str
    started: str  # DLIO's start stamp, else the earliest checkpoint record's, else "unknown"
    checkpoints: dict[str, int] = field(default_factory=dict)  # phase → checkpoints imported
    dlio_GiBps: dict[str, float | None] = field(default_factory=dict)  # phase → DLIO's rank-0 mean of rates
    ours_GiBps: dict[str, float] = field(default_factory=dict)  # phase → total bytes / total time, all ranks


def _time(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def _hydra_config(run_dir: Path) -> dict[str, Any]:
    """Model name and parallelism from DLIO's saved Hydra config, when the run kept it (optional)."""
    path = run_dir / ".hydra" / "config.yaml"
    try:
        cfg = load_yaml_bounded(path) or {}
    except UserError:  # no config kept, or a damaged one
        return {}
    model = ((cfg.get("workload") or cfg).get("model") or {}) if isinstance(cfg, dict) else {}
    par = model.get("parallelism") or {} if isinstance(model, dict) else {}
    out = {"model": model.get("name") if isinstance(model, dict) else None,
           "tensor_parallel": par.get("tensor"), "pipeline_parallel": par.get("pipeline"),
           "zero_stage": par.get("zero_stage")}
    return {k: v for k, v in out.items() if v is not None}


def _records(run_dir: Path) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    """(phase, epoch, number) → that checkpoint's record from every rank file found."""
    files = sorted(run_dir.glob("*per_epoch_stats.json"))
    per_rank = [f for f in files if RANK_FILE.match(f.name)]
    out: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for path in per_rank or files:
        stats = _load(path)
        for epoch, record in stats.items() if isinstance(stats, dict) else ():
            for key, value in record.items() if isinstance(record, dict) else ():
                m = RECORD.match(key)
                if m and isinstance(value, dict):
                    phase = "read" if m.group(1) == "load_ckpt" else "write"
                    out.setdefault((phase, str(epoch), int(m.group(2))), []).append(value)
    return out


def _order(item: tuple[tuple[str, str, int], Any]) -> tuple[int, int | str, int]:
    _, epoch, number = item[0]
    return (0, int(epoch), number) if epoch.isdigit() else (1, epoch, number)


def _measure(records: list[dict[str, Any]], size_gib: float) -> tuple[float, float, float]:
    """(duration of the slowest rank, span, aggregate GiB/s) for one checkpoint."""
    durations = [float(r["duration"]) for r in records if r.get("duration") not in (None, "")]
    duration = max(durations) if durations else float("nan")
    starts = [t for t in (_time(r.get("start")) for r in records) if t is not None]
    ends = [t for t in (_time(r.get("end")) for r in records) if t is not None]
    span = max(ends) - min(starts) if starts and ends and max(ends) > min(starts) else duration
    if size_gib and span and span == span:
        return duration, span, size_gib / span
    rates = [float(r["throughput"]) for r in records if r.get("throughput")]
    return duration, span, min(rates) if rates else float("nan")


def _dlio_mean(metric: dict[str, Any], prefix: str) -> float | None:
    """DLIO's own rank-0 figure (older DLIO: one unprefixed set, saves only)."""
    value = metric.get(f"{prefix}checkpoint_io_mean_GB_per_second")
    if value is None and prefix == "save_":
        value = metric.get("checkpoint_io_mean_GB_per_second")
    return float(value) if value is not None else None


def _base(run_dir: Path, summary: dict[str, Any], filesystem: str, repetition: int) -> dict[str, Any]:
    hosts = int(summary.get("num_hosts") or 1)
    accelerators = int(summary.get("num_accelerators") or hosts)
    size = int(float((summary.get("metric") or {}).get("checkpoint_size_GB") or 0.0) * GIB)
    config = {"model": summary.get("workload") or summary.get("model") or run_dir.name, "zero_stage": -1,
              "tensor_parallel": 1, "pipeline_parallel": 1, **_hydra_config(run_dir)}
    tp, pp = int(config["tensor_parallel"]), int(config["pipeline_parallel"])
    base: dict[str, Any] = {
        "tool": "dlio", "model": str(config["model"]), "zero_stage": int(config["zero_stage"]),
        "tensor_parallel": tp, "pipeline_parallel": pp, "nodes": hosts, "ranks_per_node": max(1, accelerators // hosts),
        "filesystem": filesystem, "io_mode": "buffered", "io_mode_used": "buffered", "cold_read_method": "none"}
    base["cell_key"] = cell_key(base)
    base.update(study="dlio", point_id=f"dlio-{repetition}-{run_dir.name}", attempt=1, repetition=repetition,
                world_size=accelerators, data_parallel=max(1, accelerators // (tp * pp)),
                nominal_checkpoint_bytes=size, written_checkpoint_bytes=size, simulated_nodes=False, fstype=None)
    return base


def _row(base: dict[str, Any], phase: str, index: int, duration: float, span: float, rate: float,
         ranks: int) -> dict[str, Any]:
    size = base["written_checkpoint_bytes"]
    nan = float("nan")
    return {**base, "phase": phase, "index": index, "bytes": size, "files": 0, "duration_s": duration,
            "span_s": span, "aggregate_GiBps": rate,
            "mlperf_throughput_GiBps": size / GIB / duration if duration and duration == duration else nan,
            "rank_bandwidth_min_GiBps": nan, "rank_bandwidth_max_GiBps": nan, "active_ranks": ranks}


def _summary_rows(base: dict[str, Any], metric: dict[str, Any]) -> list[dict[str, Any]]:
    """Only summary.json: one row per phase from DLIO's means."""
    rows = []
    for phase, prefix in (("write", "save_"), ("read", "load_")):
        mean = _dlio_mean(metric, prefix)
        if mean is not None:
            duration = float(metric.get(f"{prefix}checkpoint_duration_mean_seconds") or float("nan"))
            rows.append(_row(base, phase, 0, duration, duration, mean, 0))
    return rows


def _started(summary: dict[str, Any], records: dict[tuple[str, str, int], list[dict[str, Any]]]) -> str:
    if summary.get("start"):
        return str(summary["start"])
    stamps = [r["start"] for recs in records.values() for r in recs if _time(r.get("start")) is not None]
    return min(stamps) if stamps else "unknown"


def import_run(run_dir: Path, filesystem: str = "dlio", repetition: int = 0) -> tuple[pd.DataFrame, DlioRun]:
    """One DLIO output folder: rows in the columns of our checkpoints table, and its record."""
    summary_path = run_dir / "summary.json"
    if not summary_path.is_file():
        raise UserError(f"--import-dlio {run_dir}: no summary.json (point it at a DLIO output directory)")
    summary = _load(summary_path)
    metric = summary.get("metric") or {}
    base = _base(run_dir, summary, filesystem, repetition)
    size_gib = base["written_checkpoint_bytes"] / GIB
    records = _records(run_dir)
    rows: list[dict[str, Any]] = []
    counters = {"write": 0, "read": 0}
    for (phase, _epoch, _n), recs in sorted(records.items(), key=_order):
        duration, span, rate = _measure(recs, size_gib)
        rows.append(_row(base, phase, counters[phase], duration, span, rate, len(recs)))
        counters[phase] += 1
    rows = rows or _summary_rows(base, metric)
    if not rows:
        raise UserError(f"--import-dlio {run_dir}: no checkpoint records in summary.json or *per_epoch_stats.json")
    frame = pd.DataFrame.from_records(rows)
    run = DlioRun(str(run_dir), _started(summary, records))
    for phase, prefix in (("write", "save_"), ("read", "load_")):
        mine = frame[frame["phase"] == phase]
        if not mine.empty:
            run.checkpoints[phase] = len(mine)
            run.dlio_GiBps[phase] = _dlio_mean(metric, prefix)
            run.ours_GiBps[phase] = float(mine["bytes"].sum() / GIB / mine["span_s"].sum())
    return frame, run


def import_dlio(run_dir: Path, filesystem: str = "dlio") -> pd.DataFrame:
    """One DLIO run as rows of our checkpoints table."""
    return import_run(run_dir, filesystem)[0]


def import_runs(run_dirs: list[Path], filesystem: str = "dlio") -> tuple[pd.DataFrame, list[DlioRun]]:
    """Several DLIO runs (e.g. a write invocation and a read invocation), every one kept."""
    seen: set[Path] = set()
    frames, runs = [], []
    for i, run_dir in enumerate(run_dirs):
        if run_dir.resolve() in seen:
            raise UserError(f"--import-dlio {run_dir}: given twice")
        seen.add(run_dir.resolve())
        frame, run = import_run(run_dir, filesystem, repetition=i)
        frames.append(frame)
        runs.append(run)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), runs
