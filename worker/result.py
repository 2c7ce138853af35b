"""The result file schema: the one definition the worker writes and `collect` validates.

Units are in every field name: bytes (B), seconds (s), GiB/s (GiBps, 2^30 B/s).
The DLIO-compatible block keeps DLIO's names; DLIO's "GB" there means GiB, as in DLIO.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from studyctl.spec.points import Point
from worker.strategy_result import StrategyInfo

SCHEMA_VERSION = 1
Phase = Literal["write", "read"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankTiming(_Strict):
    rank: int
    host: str
    start_s: float  # MPI.Wtime anchored to the epoch per rank; seconds since the earliest rank start
    end_s: float
    bytes: int
    files: int
    duration_s: float
    bandwidth_GiBps: float  # 0 for a rank that moved no bytes


class CheckpointTiming(_Strict):
    phase: Phase
    index: int  # 0-based checkpoint (write) or restore (read) number
    step_dir: str  # relative to the point directory, e.g. "global_epoch1_step3" (DLIO naming)
    bytes: int  # written (or read) by all ranks in this checkpoint
    files: int
    duration_max_s: float  # slowest rank's own duration (MLPerf's duration)
    span_s: float  # max end - min start over ranks
    aggregate_GiBps: float  # bytes / span_s / 2^30
    rank_bandwidth_min_GiBps: float  # over ranks that moved bytes (MLPerf's throughput)
    rank_bandwidth_max_GiBps: float
    ranks: list[RankTiming]


class PhaseSummary(_Strict):
    """Statistics over the checkpoints of one phase of this point."""

    checkpoints: int
    bytes_per_checkpoint: int
    aggregate_GiBps_mean: float
    aggregate_GiBps_stdev: float  # sample stdev (n-1); 0 for one checkpoint
    aggregate_GiBps_min: float
    aggregate_GiBps_max: float
    duration_s_mean: float  # mean over checkpoints of duration_max_s
    duration_s_stdev: float
    mlperf_duration_max_s: float  # max over checkpoints of the slowest rank's duration
    mlperf_throughput_min_GiBps: float  # min over checkpoints of rank_bandwidth_min_GiBps


class DlioCompat(_Strict):
    """DLIO's summary.json metrics computed DLIO's way (rank 0 only, mean of rates), in GiB."""

    checkpoint_size_GB: float
    save_checkpoint_io_mean_GB_per_second: float | None = None
    save_checkpoint_io_stdev_GB_per_second: float | None = None
    save_checkpoint_duration_mean_seconds: float | None = None
    save_checkpoint_duration_stdev_seconds: float | None = None
    load_checkpoint_io_mean_GB_per_second: float | None = None
    load_checkpoint_io_stdev_GB_per_second: float | None = None
    load_checkpoint_duration_mean_seconds: float | None = None
    load_checkpoint_duration_stdev_seconds: float | None = None


class FilesystemInfo(_Strict):
    name: str
    path: str
    mount_point: str
    fstype: str
    source: str
    mount_options: str
    free_bytes_before: int
    free_bytes_after: int
    total_bytes: int


class SlurmInfo(_Strict):
    job_id: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    nodelist: str | None = None
    cluster: str | None = None
    partition: str | None = None


class Provenance(_Strict):
    hostnames: list[str]  # per rank, rank order
    node_names: list[str]  # distinct nodes (SLURMD_NODENAME when present), sorted
    simulated_nodes: bool  # local backend: nodes are rank groups on one machine
    world_size: int
    ranks_per_node: int
    slurm: SlurmInfo | None = None
    python_version: str
    mpi4py_version: str
    mpi_library_version: str
    kernel: str
    studyctl_version: str
    started_at: str  # ISO 8601 UTC
    finished_at: str
    host_memory_bytes: int | None = None  # the smallest host's physical memory (MLPerf's page-cache rule)


class IoInfo(_Strict):
    io_mode_requested: str
    io_mode_used: str  # differs only when direct_fallback was allowed and O_DIRECT refused
    direct_fallback_reason: str | None = None
    cold_read_method: Literal["direct", "fadvise", "none"]
    restore_mode: Literal["rank", "full", "broadcast"]
    rank_shift: int
    buffer_bytes: int
    block_bytes: int
    fsync_per_file: bool  # false mirrors DLIO (which never fsyncs): every figure is "no fsync"
    naming: Literal["dlio", "deepspeed"] = "dlio"  # file and folder names written
    subset_world_size: int | None = None  # MLPerf subset mode: the full run this point wrote a share of


class SizeInfo(_Strict):
    scale: float
    nominal_checkpoint_bytes: int  # the full-size model's checkpoint
    written_checkpoint_bytes: int  # what each checkpoint actually wrote (scaled)
    files_per_checkpoint: int
    bytes_per_rank_max: int
    bytes_per_rank_min: int
    read_bytes_per_restore: int  # larger than written with restore "full"


class Result(_Strict):
    schema_version: Literal[1]
    study: str
    point_id: str
    attempt: int
    point: Point
    sizes: SizeInfo
    io: IoInfo
    checkpoints: list[CheckpointTiming]
    summary: dict[Phase, PhaseSummary]
    dlio: DlioCompat
    filesystem: FilesystemInfo
    provenance: Provenance
    strategy: StrategyInfo | None = None  # absent in results from before strategies


class WorkerError(_Strict):
    """Written (atomically, by rank 0) instead of a result on a failure the worker understood."""

    schema_version: Literal[1]
    point_id: str
    attempt: int
    failure_class: str  # a studyctl.states.FailureClass value
    reason: str  # one line, with the numbers
