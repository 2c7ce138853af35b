"""One result as the files of an MLPerf v3.0 checkpointing run leaf: summary.json, per-rank stats, run metadata
and the provenance stamp, with the names the published v3.0 tree uses (mlcommons/storage_results_v3.0).

Units: every GB here is 10^9 B (MLPerf's submission unit). DLIO itself labels GiB as "GB" (Rules.md notes it
under Table 2); studyctl does not repeat that. Metrics follow MLPerf's definitions, not DLIO's rank-0 shortcut:
per checkpoint, duration = the maximum over processes, throughput = checkpoint size / that duration (the
minimum over processes of size / the process's duration); then mean and population stdev over checkpoints.
Per-rank throughput is DLIO's: the global checkpoint size / that rank's duration. studyctl stamps each rank
relative to its checkpoint's earliest start, so per-rank entries give `start_offset_s`, not clock times.
"""

from __future__ import annotations

from datetime import datetime
from statistics import fmean, pstdev
from typing import Any

from studyctl.definition.result.result_schema import CheckpointTiming, Result
from studyctl.units import GB

PHASE_PREFIX = {"write": "save", "read": "load"}  # DLIO's names of the two phases
UNKNOWN = "unknown"  # how a provenance stamp says it cannot tell (never null, Rules.md §2.1.6)
UNITS_NOTE = ("GB = 10^9 B throughout; duration = max over processes, throughput = checkpoint size / duration, "
              "mean and population stdev over checkpoints")


def run_datetime(r: Result) -> str:
    """The leaf's YYYYMMDD_HHmmss from the run's start (UTC, as the result records it)."""
    try:
        return datetime.fromisoformat(r.provenance.started_at).strftime("%Y%m%d_%H%M%S")
    except ValueError:
        return "00000000_000000"


def _done(r: Result, phase: str) -> list[CheckpointTiming]:
    return [c for c in r.checkpoints if c.phase == phase and c.duration_max_s > 0]


def phase_metrics(r: Result, phase: str) -> dict[str, float]:
    """`save_*` or `load_*` metrics of summary.json; {} when the phase did not run."""
    done = _done(r, phase)
    if not done:
        return {}
    rates = [c.bytes / GB / c.duration_max_s for c in done]
    durations = [c.duration_max_s for c in done]
    name = PHASE_PREFIX[phase]
    return {f"{name}_checkpoint_io_mean_GB_per_second": fmean(rates),
            f"{name}_checkpoint_io_stdev_GB_per_second": pstdev(rates),
            f"{name}_checkpoint_duration_mean_seconds": fmean(durations),
            f"{name}_checkpoint_duration_stdev_seconds": pstdev(durations)}


def summary_json(r: Result, storage_api: str) -> dict[str, Any]:
    prov = r.provenance
    hosts = len(prov.node_names)
    memory = prov.host_memory_bytes
    metric = {**phase_metrics(r, "write"), **phase_metrics(r, "read"),
              "checkpoint_size_GB": r.sizes.written_checkpoint_bytes / GB}
    return {
        "start": prov.started_at, "end": prov.finished_at,
        "num_accelerators": prov.world_size, "num_hosts": hosts, "hostname": prov.hostnames[0],
        "metric": metric,
        "host_memory_GB": [memory / GB] * hosts if memory else None,
        "epochs": 0,
        "studyctl": {"units": UNITS_NOTE, "point_id": r.point_id, "attempt": r.attempt, "storage_api": storage_api,
                     "scale": r.sizes.scale, "nominal_checkpoint_size_GB": r.sizes.nominal_checkpoint_bytes / GB,
                     "simulated_nodes": prov.simulated_nodes},
    }


def rank_stats(r: Result) -> dict[int, dict[str, Any]]:
    """Per rank, the contents of `<rank>_per_epoch_stats.json`: {"1": {save_ckpt1: {...}, load_ckpt1: ...}}."""
    out: dict[int, dict[str, Any]] = {rank: {} for rank in range(r.provenance.world_size)}
    for phase, name in PHASE_PREFIX.items():
        for n, c in enumerate(_done(r, phase), start=1):
            size = c.bytes / GB
            for t in c.ranks:
                out.setdefault(t.rank, {})[f"{name}_ckpt{n}"] = {
                    "start_offset_s": t.start_s, "duration": t.duration_s,
                    "throughput": size / t.duration_s if t.duration_s > 0 else None}
    return {rank: {"1": entries} for rank, entries in out.items()}


def metadata_json(r: Result, storage_api: str) -> dict[str, Any]:
    """`checkpointing_<datetime>_metadata.json`: what ran, in mlpstorage's names."""
    p, prov = r.point, r.provenance
    writes = sum(1 for c in r.checkpoints if c.phase == "write")
    return {
        "benchmark_type": "checkpointing", "model": p.model.name, "command": "run",
        "run_datetime": run_datetime(r), "num_processes": p.world_size,
        "accelerator": None,  # MLPerf's --accelerator-type: studyctl simulates none
        "parameters": {
            "model": {"name": p.model.name, "parallelism": {"tensor": p.tensor_parallel,
                                                            "pipeline": p.pipeline_parallel,
                                                            "zero_stage": p.zero_stage}},
            "checkpoint": {"checkpoint_folder": r.filesystem.path, "num_checkpoints_write": writes,
                           "num_checkpoints_read": len(r.checkpoints) - writes, "fsync": r.io.fsync_per_file,
                           "mode": "subset" if p.checkpoint.subset_world_size else "default"},
            "storage": {"storage_type": "s3" if storage_api == "object" else "local_fs",
                        "storage_root": r.filesystem.path},
        },
        "system_info": {"num_hosts": len(prov.node_names), "min_memory_bytes": prov.host_memory_bytes,
                        "hosts": [{"hostname": h} for h in prov.node_names]},
    }


def provenance_json(r: Result, edition: str, storage_api: str) -> dict[str, Any]:
    """The leaf's stamp (schema mlps-run-provenance/1): what studyctl can tell, "unknown" for the rest."""
    library = {"name": UNKNOWN, "version": UNKNOWN} if storage_api == "object" else {"name": "none"}
    return {
        "schema": "mlps-run-provenance/1", "rules_edition": edition, "layout_version": 3,
        "tool": {"name": "studyctl", "version": r.provenance.studyctl_version, "git_sha": UNKNOWN,
                 "code_image": UNKNOWN},
        "dlio": {"version": "n/a", "source": "n/a", "commit": "n/a"},  # studyctl's worker is not DLIO
        "storage_library": library,
        "core_config": {"algorithm": "core-config-v1", "allowlist": "checkpointing@1", "hash": UNKNOWN, "keys": []},
        "stamped_at": r.provenance.finished_at, "stamped_by": "studyctl",
        "provenance": {"rules_edition": "declared", "tool": "runtime", "dlio": "n/a",
                       "storage_library": "unknown" if storage_api == "object" else "n/a", "core_config": "unknown"},
    }
