"""Import a DLIO benchmark run (summary.json + *per_epoch_stats.json) as rows of our checkpoints table.

DLIO's output (dlio_benchmark/utils/statscounter.py): rank 0 writes summary.json
(num_accelerators, num_hosts, metric.checkpoint_size_GB, metric.save_checkpoint_io_mean_GB_per_second,
...); every rank writes `<rank>_per_epoch_stats.json`: {epoch: {"save_ckpt<N>" | "load_ckpt<N>":
{start, end, duration, throughput}}}. Older DLIO wrote one rank-0 `per_epoch_stats.json` with
"ckpt<N>" (saves only, duration a string). DLIO's "GB" are GiB.

We measure DLIO's checkpoints our way where we can: over all ranks' records of a checkpoint,
duration = the slowest rank's, aggregate bandwidth = size / (last end − first start). Rows carry
tool = "dlio" (or "dlio, checkpoint class <name>" for a custom checkpoint class) and settings read from
DLIO's saved config (`.hydra/config.yaml`): fsync False for DLIO's stock writer (its fsync option is
misspelled in its code, so it never syncs), unknown for a custom class; reads warm (DLIO restores right
after writing, from the page cache) unless the user states `--dlio-reads cold`. Several runs are imported
side by side; runs with the same settings are repetitions of one cell, differently configured ones are
separate cells, and the report lists each folder with its label and DLIO's own rank-0 figures beside ours.

Every file is validated first (`dlio.files`), and every row meets the rules our own results meet
(`attempt.plausibility`): bytes moved in no time, or faster than 1 PiB/s, are not figures. A damaged or
implausible folder is left out with a reason naming the file (`import_runs`' problems); the rest is kept.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from studyctl.analysis.adequacy import STATED_COLD, dlio_label
from studyctl.analysis.cells import cell_key
from studyctl.analysis.dlio.files import (
    DlioDamaged,
    HydraConfig,
    Metric,
    Record,
    Summary,
    hydra_config,
    load_json,
    load_summary,
    validated,
)
from studyctl.analysis.findings import Problem
from studyctl.attempt.plausibility import MAX_GIBPS
from studyctl.attempt.result_file import name_problem
from studyctl.definition.inputs.names import is_plain_name
from studyctl.errors import UserError
from studyctl.units import GIB

RECORD = re.compile(r"^(save_ckpt|load_ckpt|ckpt)([0-9]{1,9})$")  # a longer number is no checkpoint of DLIO's
RANK_FILE = re.compile(r"^([0-9]{1,9})_per_epoch_stats\.json$")
Records = dict[tuple[str, str, int], list[Record]]


@dataclass
class DlioRun:
    """One imported DLIO output folder: DLIO's own summary figures beside ours from its per-rank files."""

    folder: str
    started: str  # DLIO's start stamp, else the earliest checkpoint record's, else "unknown"
    label: str  # what its config and the user say: checkpoint class, fsync, warm or cold reads
    checkpoints: dict[str, int] = field(default_factory=dict)  # phase → checkpoints imported
    dlio_GiBps: dict[str, float | None] = field(default_factory=dict)  # phase → DLIO's rank-0 mean of rates
    ours_GiBps: dict[str, float] = field(default_factory=dict)  # phase → total bytes / total time, all ranks


def _time(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except (ValueError, OverflowError, OSError):
        return None


def _records(run_dir: Path) -> Records:
    """(phase, epoch, number) → that checkpoint's record from every rank file found, each validated."""
    files = sorted(run_dir.glob("*per_epoch_stats.json"))
    per_rank = [f for f in files if RANK_FILE.match(f.name)]
    out: Records = {}
    for path in per_rank or files:
        stats = load_json(path, run_dir)
        if not isinstance(stats, dict):
            raise DlioDamaged(path, f"the file is a JSON {type(stats).__name__}, not an object of epochs")
        for epoch, entries in stats.items():
            for key, value in entries.items() if isinstance(entries, dict) else ():
                m = RECORD.match(key)
                if m:
                    phase = "read" if m.group(1) == "load_ckpt" else "write"
                    record = validated(Record, value, path, f"{epoch}.{key}")
                    out.setdefault((phase, str(epoch), int(m.group(2))), []).append(record)
    return out


def _order(item: tuple[tuple[str, str, int], Any]) -> tuple[int, int | str, int]:
    _, epoch, number = item[0]
    return (0, int(epoch), number) if re.fullmatch(r"[0-9]{1,9}", epoch) else (1, epoch, number)


def _measure(records: list[Record], size_gib: float) -> tuple[float, float, float]:
    """(duration of the slowest rank, span, aggregate GiB/s) for one checkpoint (NaN where DLIO gave nothing)."""
    durations = [r.duration for r in records if r.duration is not None]
    duration = max(durations) if durations else math.nan
    starts = [t for t in (_time(r.start) for r in records) if t is not None]
    ends = [t for t in (_time(r.end) for r in records) if t is not None]
    span = max(ends) - min(starts) if starts and ends and max(ends) > min(starts) else duration
    if size_gib and span > 0:
        return duration, span, size_gib / span
    rates = [r.throughput for r in records if r.throughput]
    return duration, span, min(rates) if rates else math.nan


def _model_name(run_dir: Path, summary: Summary, hydra_name: str | None) -> str:
    """DLIO's model or workload name; the folder's name when DLIO gives none (or "dlio", if that is no name)."""
    hydra, summary_path = run_dir / ".hydra" / "config.yaml", run_dir / "summary.json"
    for path, key, name in ((hydra, "model.name", hydra_name), (summary_path, "workload", summary.workload),
                            (summary_path, "model", summary.model)):
        if name is not None:
            problem = name_problem(key, name)
            if problem:
                raise DlioDamaged(path, problem)
            return name
    return run_dir.name if is_plain_name(run_dir.name) else "dlio"


READS = ("warm", "cold")  # how the read phase ran, as the user states it (DLIO cannot tell)


def _checkpoint_settings(config: HydraConfig, reads: str) -> dict[str, Any]:
    """The cell settings DLIO's config decides: who wrote (its checkpoint class), fsync, rank shift, reads.

    The stock writer never fsyncs (fsync False, whatever its `fsync` key says); a custom class's fsync is
    unknown (None). A different class is another tool: `tool` = "dlio" or "dlio, checkpoint class <name>"."""
    ckpt = config.checkpoint
    custom = ckpt.checkpoint_mechanism_classname if ckpt else None
    return {"tool": f"dlio, checkpoint class {custom.rsplit('.', 1)[-1]}" if custom else "dlio",
            "fsync": None if custom else False,
            "rank_shift": ckpt.recovery_rank_shift if ckpt and ckpt.recovery_rank_shift is not None else 0,
            "cold_read_method": STATED_COLD if reads == "cold" else "none"}


def _base(run_dir: Path, summary: Summary, filesystem: str, repetition: int, reads: str) -> dict[str, Any]:
    hosts = summary.num_hosts
    accelerators = summary.num_accelerators or hosts
    size = int((summary.metric or Metric()).checkpoint_size_GB * GIB)
    config = hydra_config(run_dir)
    hydra = config.model
    par = hydra.parallelism if hydra and hydra.parallelism else None
    tp, pp = (par.tensor or 1, par.pipeline or 1) if par else (1, 1)
    zero = par.zero_stage if par and par.zero_stage is not None else -1
    if tp * pp > accelerators:
        raise DlioDamaged(run_dir / ".hydra" / "config.yaml",
                          f"tensor × pipeline = {tp * pp} is more than num_accelerators = {accelerators}")
    base: dict[str, Any] = {
        "tool": "dlio", "model": _model_name(run_dir, summary, hydra.name if hydra else None), "zero_stage": zero,
        "tensor_parallel": tp, "pipeline_parallel": pp, "nodes": hosts, "ranks_per_node": accelerators // hosts,
        "filesystem": filesystem, "io_mode": "buffered", "io_mode_used": "buffered",
        **_checkpoint_settings(config, reads)}
    base["cell_key"] = cell_key(base)
    base.update(study="dlio", point_id=f"dlio-{repetition}-{run_dir.name}", attempt=1, repetition=repetition,
                world_size=accelerators, data_parallel=max(1, accelerators // (tp * pp)),
                nominal_checkpoint_bytes=size, written_checkpoint_bytes=size, simulated_nodes=False, fstype=None)
    return base


def _row(base: dict[str, Any], phase: str, index: int, duration: float, span: float, rate: float,
         ranks: int) -> dict[str, Any]:
    size = base["written_checkpoint_bytes"]
    return {**base, "phase": phase, "index": index, "bytes": size, "files": 0, "duration_s": duration,
            "span_s": span, "aggregate_GiBps": rate,
            "mlperf_throughput_GiBps": size / GIB / duration if duration > 0 else math.nan,
            "rank_bandwidth_min_GiBps": math.nan, "rank_bandwidth_max_GiBps": math.nan, "active_ranks": ranks}


def implausible_row(row: dict[str, Any]) -> str | None:
    """The rules our own results meet, for one DLIO checkpoint row; None when it can be tabulated."""
    what = f"{row['phase']} {row['index']}"
    if not (row["span_s"] > 0):  # NaN too: DLIO gave no time for it
        return f"{what}: {row['bytes']} bytes in {row['span_s']} s (no positive duration or start/end stamps)"
    for name in ("aggregate_GiBps", "mlperf_throughput_GiBps"):
        if row[name] > MAX_GIBPS:
            return f"{what}: {name} = {row[name]:g} GiB/s, above {MAX_GIBPS:g} (1 PiB/s)"
    if not (row["aggregate_GiBps"] > 0):
        return f"{what}: no rate (no checkpoint_size_GB and no throughput)"
    return None


def _summary_rows(base: dict[str, Any], metric: Metric) -> list[dict[str, Any]]:
    """Only summary.json: one row per phase from DLIO's means."""
    rows = []
    for phase, prefix in (("write", "save_"), ("read", "load_")):
        mean = metric.mean_GiBps(prefix)
        if mean is not None:
            duration = metric.duration_s(prefix)
            duration = math.nan if duration is None else duration
            rows.append(_row(base, phase, 0, duration, duration, mean, 0))
    return rows


def _started(summary: Summary, records: Records) -> str:
    if summary.start:
        return summary.start
    stamps = [r.start for recs in records.values() for r in recs if r.start and _time(r.start) is not None]
    return min(stamps) if stamps else "unknown"


def _rows(run_dir: Path, summary_path: Path, summary: Summary, base: dict[str, Any], records: Records
          ) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    counters = {"write": 0, "read": 0}
    for (phase, _epoch, _n), recs in sorted(records.items(), key=_order):
        duration, span, rate = _measure(recs, base["written_checkpoint_bytes"] / GIB)
        rows.append(_row(base, phase, counters[phase], duration, span, rate, len(recs)))
        counters[phase] += 1
    rows = rows or _summary_rows(base, summary.metric or Metric())
    if not rows:
        raise DlioDamaged(summary_path, "no checkpoint records in summary.json or *per_epoch_stats.json")
    for row in rows:
        problem = implausible_row(row)
        if problem:
            where = summary_path if not records else run_dir / "*per_epoch_stats.json"
            raise DlioDamaged(where, f"implausible figures: {problem}")
    return rows


def import_run(run_dir: Path, filesystem: str = "dlio", repetition: int = 0, reads: str = "warm"
               ) -> tuple[pd.DataFrame, DlioRun]:
    """One DLIO output folder: rows in the columns of our checkpoints table, and its record.

    UserError when the folder has no summary.json; DlioDamaged (a UserError) when a file of it is unusable."""
    summary_path = run_dir / "summary.json"
    if not os.path.lexists(summary_path):
        raise UserError(f"--import-dlio {run_dir}: no summary.json (point it at a DLIO output directory)")
    summary = load_summary(summary_path, run_dir)
    base = _base(run_dir, summary, filesystem, repetition, reads)
    records = _records(run_dir)
    frame = pd.DataFrame.from_records(_rows(run_dir, summary_path, summary, base, records))
    run = DlioRun(str(run_dir), _started(summary, records), dlio_label(base))
    metric = summary.metric or Metric()
    for phase, prefix in (("write", "save_"), ("read", "load_")):
        mine = frame[frame["phase"] == phase]
        if not mine.empty:
            run.checkpoints[phase] = len(mine)
            run.dlio_GiBps[phase] = metric.mean_GiBps(prefix)
            run.ours_GiBps[phase] = float(mine["bytes"].sum() / GIB / mine["span_s"].sum())
    return frame, run


def import_dlio(run_dir: Path, filesystem: str = "dlio", reads: str = "warm") -> pd.DataFrame:
    """One DLIO run as rows of our checkpoints table (UserError, exit 2, for a damaged one)."""
    return import_run(run_dir, filesystem, reads=reads)[0]


def import_runs(run_dirs: list[Path], filesystem: str = "dlio", reads: str = "warm"
                ) -> tuple[pd.DataFrame, list[DlioRun], list[Problem]]:
    """Several DLIO runs (e.g. a write invocation and a read invocation): every usable one kept, each damaged
    one a problem naming its file (the others still count). UserError for a folder that is no DLIO output.
    Runs whose configs differ in what counts (checkpoint class, rank shift, model, ...) are different cells;
    `reads` (warm | cold) is how the user says the read phase ran."""
    if reads not in READS:
        raise UserError(f"--dlio-reads {reads!r}: expected one of {', '.join(READS)}")
    seen: set[Path] = set()
    frames, runs, problems = [], [], []
    for i, run_dir in enumerate(run_dirs):
        if run_dir.resolve() in seen:
            raise UserError(f"--import-dlio {run_dir}: given twice")
        seen.add(run_dir.resolve())
        try:
            frame, run = import_run(run_dir, filesystem, repetition=i, reads=reads)
        except DlioDamaged as exc:
            problems.append(Problem(f"dlio-{i}-{run_dir.name}", None, str(exc.path), exc.reason))
            continue
        frames.append(frame)
        runs.append(run)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), runs, problems
