"""Import a DLIO benchmark run (summary.json + *per_epoch_stats.json) as rows of our checkpoints table.

DLIO's output (dlio_benchmark/utils/statscounter.py): rank 0 writes summary.json
(num_accelerators, num_hosts, metric.checkpoint_size_GB, metric.save_checkpoint_io_mean_GB_per_second,
...); every rank writes `<rank>_per_epoch_stats.json`: {epoch: {"save_ckpt<N>" | "load_ckpt<N>":
{start, end, duration, throughput}}}. Older DLIO wrote one rank-0 `per_epoch_stats.json` with
"ckpt<N>" (saves only, duration a string). DLIO's "GB" are GiB.

We measure DLIO's checkpoints our way where we can: over all ranks' records of a checkpoint,
duration = the slowest rank's, aggregate bandwidth = size / (last end − first start). Rows carry
tool = "dlio", so tables, plots and the report show both tools side by side.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from studyctl.analysis.tables import io_label
from studyctl.errors import UserError
from studyctl.units import GIB

RECORD = re.compile(r"^(save_ckpt|load_ckpt|ckpt)(\d+)$")
RANK_FILE = re.compile(r"^(\d+)_per_epoch_stats\.json$")


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable DLIO JSON file ({exc})", 1) from None


def _time(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def _hydra_config(run_dir: Path) -> dict[str, Any]:
    """Model name and parallelism from DLIO's saved Hydra config, when the run kept it (optional)."""
    path = run_dir / ".hydra" / "config.yaml"
    try:
        import yaml

        cfg = yaml.safe_load(path.read_text()) or {}
    except (OSError, ValueError, ImportError):
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


def import_dlio(run_dir: Path, filesystem: str = "dlio") -> pd.DataFrame:
    """One row per DLIO checkpoint save/load, in the columns of our checkpoints table."""
    summary_path = run_dir / "summary.json"
    if not summary_path.is_file():
        raise UserError(f"--import-dlio {run_dir}: no summary.json (point it at a DLIO output directory)", 2)
    summary = _load(summary_path)
    metric = summary.get("metric") or {}
    hosts = int(summary.get("num_hosts") or 1)
    accelerators = int(summary.get("num_accelerators") or hosts)
    size_gib = float(metric.get("checkpoint_size_GB") or 0.0)
    config = {"model": summary.get("workload") or summary.get("model") or run_dir.name, "zero_stage": -1,
              "tensor_parallel": 1, "pipeline_parallel": 1, **_hydra_config(run_dir)}
    tp, pp = int(config["tensor_parallel"]), int(config["pipeline_parallel"])
    base = {"tool": "dlio", "study": "dlio", "point_id": f"dlio-{run_dir.name}", "attempt": 1,
            "cell_key": f"dlio-{run_dir.name}", "model": str(config["model"]),
            "zero_stage": int(config["zero_stage"]), "tensor_parallel": tp, "pipeline_parallel": pp,
            "data_parallel": max(1, accelerators // (tp * pp)), "nodes": hosts,
            "ranks_per_node": max(1, accelerators // hosts), "world_size": accelerators,
            "filesystem": filesystem, "io_mode": io_label("buffered", fsync=False),  # DLIO never fsyncs
            "io_mode_used": "buffered", "repetition": 0,
            "scale": 1.0, "block_bytes": 0, "cold_read_method": "none", "restore_mode": "rank",
            "nominal_checkpoint_bytes": int(size_gib * GIB)}
    nan = float("nan")
    rows: list[dict[str, Any]] = []
    counters = {"write": 0, "read": 0}
    for (phase, _epoch, _n), records in sorted(_records(run_dir).items(), key=_order):
        duration, span, rate = _measure(records, size_gib)
        rows.append({**base, "phase": phase, "index": counters[phase], "bytes": int(size_gib * GIB),
                     "files": 0, "duration_s": duration, "span_s": span, "aggregate_GiBps": rate,
                     "rank_bandwidth_min_GiBps": nan, "rank_bandwidth_max_GiBps": nan})
        counters[phase] += 1
    if not rows:  # only the summary: one row per phase from DLIO's means
        for phase, prefix in (("write", "save_"), ("read", "load_")):
            mean = metric.get(f"{prefix}checkpoint_io_mean_GB_per_second")
            if mean is not None:
                duration = float(metric.get(f"{prefix}checkpoint_duration_mean_seconds") or float("nan"))
                rows.append({**base, "phase": phase, "index": 0, "bytes": int(size_gib * GIB), "files": 0,
                             "duration_s": duration, "span_s": duration, "aggregate_GiBps": float(mean),
                             "rank_bandwidth_min_GiBps": nan, "rank_bandwidth_max_GiBps": nan})
    if not rows:
        raise UserError(f"--import-dlio {run_dir}: no checkpoint records in summary.json or "
                        "*per_epoch_stats.json", 1)
    return pd.DataFrame.from_records(rows)
