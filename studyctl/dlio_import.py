"""Import a DLIO benchmark run (summary.json + *per_epoch_stats.json) as rows of our checkpoints table.

DLIO reports "GB" that are GiB; its per-checkpoint records are rank 0's. Rows carry tool = "dlio"
so tables, plots and the report show both tools side by side.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from studyctl.errors import UserError

GIB = 1 << 30


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable DLIO JSON file ({exc})", 1) from None


def import_dlio(run_dir: Path, filesystem: str = "dlio") -> pd.DataFrame:
    """One row per DLIO checkpoint save/load, in the columns of our checkpoints table."""
    summary_path = run_dir / "summary.json"
    if not summary_path.is_file():
        raise UserError(f"--import-dlio {run_dir}: no summary.json (point it at a DLIO output directory)", 2)
    summary = _load(summary_path)
    metric = summary.get("metric", {})
    hosts = int(summary.get("num_hosts") or 1)
    accelerators = int(summary.get("num_accelerators") or hosts)
    size_gib = float(metric.get("checkpoint_size_GB") or 0.0)
    workload = summary.get("workload") or summary.get("model") or run_dir.name
    base = {"tool": "dlio", "study": "dlio", "point_id": f"dlio-{run_dir.name}", "attempt": 1,
            "cell_key": f"dlio-{run_dir.name}", "model": str(workload),
            "zero_stage": int(summary.get("zero_stage", -1)),
            "tensor_parallel": int(summary.get("tensor_parallelism", 1)),
            "pipeline_parallel": int(summary.get("pipeline_parallelism", 1)), "data_parallel": 1, "nodes": hosts,
            "ranks_per_node": max(1, accelerators // hosts), "world_size": accelerators, "filesystem": filesystem,
            "io_mode": "buffered", "io_mode_used": "buffered", "repetition": 0, "scale": 1.0, "block_bytes": 0,
            "cold_read_method": "none", "restore_mode": "rank", "nominal_checkpoint_bytes": int(size_gib * GIB)}
    rows: list[dict[str, Any]] = []
    for stats_path in sorted(run_dir.glob("*per_epoch_stats.json")):
        stats = _load(stats_path)
        for epoch, record in stats.items() if isinstance(stats, dict) else ():
            if not isinstance(record, dict):
                continue
            for key, value in record.items():
                # newer DLIO: save_ckpt<N> / load_ckpt<N>; older: ckpt<N> (saves only)
                phase = ("write" if key.startswith(("save_ckpt", "ckpt")) else
                         "read" if key.startswith("load_ckpt") else None)
                if phase is None or not isinstance(value, dict):
                    continue
                duration = float(value.get("duration") or 0.0)
                rate = float(value.get("throughput") or (size_gib / duration if duration else 0.0))
                rows.append({**base, "phase": phase, "index": len([r for r in rows if r["phase"] == phase]),
                             "bytes": int(size_gib * GIB), "files": 0, "duration_s": duration, "span_s": duration,
                             "aggregate_GiBps": rate, "rank_bandwidth_min_GiBps": float("nan"),
                             "rank_bandwidth_max_GiBps": float("nan"), "epoch": str(epoch)})
    if not rows:  # only the summary: one row per phase from the means
        for phase, prefix in (("write", "save_"), ("read", "load_")):
            for p in (prefix, ""):
                mean = metric.get(f"{p}checkpoint_io_mean_GB_per_second")
                if mean is not None:
                    duration = metric.get(f"{p}checkpoint_duration_mean_seconds") or 0.0
                    rows.append({**base, "phase": phase, "index": 0, "bytes": int(size_gib * GIB), "files": 0,
                                 "duration_s": float(duration), "span_s": float(duration),
                                 "aggregate_GiBps": float(mean), "rank_bandwidth_min_GiBps": float("nan"),
                                 "rank_bandwidth_max_GiBps": float("nan")})
                    break
    if not rows:
        raise UserError(f"--import-dlio {run_dir}: no checkpoint records in summary.json or *per_epoch_stats.json", 1)
    frame = pd.DataFrame.from_records(rows)
    return frame.drop(columns=[c for c in ("epoch",) if c in frame.columns])
