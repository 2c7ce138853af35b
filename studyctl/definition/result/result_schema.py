"""The result file schema: the one definition the worker writes and `collect` validates.

Every field's definition lives here, once. Units are in every field name: bytes (B), seconds (s),
GiB/s (GiBps, 2^30 B/s). A rank's duration is its own end − start around its I/O of one checkpoint
(between barriers); a checkpoint's span is the last rank's end − the first rank's start.
`mlperf_*` fields follow MLPerf Storage / DLIO exactly: per checkpoint, duration = the maximum over
processes, throughput = the minimum over processes of DLIO's per-rank throughput, which is the global
checkpoint size / that rank's duration (so throughput = size / the slowest rank's duration).
Our own figures with other meanings carry other names (`aggregate_GiBps`, `rank_bandwidth_*`).
The DLIO-compatible block keeps DLIO's names; DLIO's "GB" there means GiB, as in DLIO.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from studyctl.definition.checkpoint.points import Point
from studyctl.definition.inputs.vocabulary import ColdReadMethod, Naming, RestoreMode, SchemaVersion
from studyctl.definition.inputs.vocabulary import Phase as Phase  # where the worker and collect find it
from studyctl.definition.result.result_fields import (
    Bytes,
    Count,
    EngineInfo,
    Fraction,
    GiBSize,
    Positive,
    Rank,
    Ranks,
    Rate,
    RecoveryTiming,
    Seconds,
    StrategyInfo,
)
from studyctl.units import GIB

SCHEMA_VERSION: SchemaVersion = 1
# Field constraints: a damaged or hand-edited file with NaN, infinite or negative figures fails validation
# (collect reports it as unusable, with the field). Every number's type carries its Unit (seconds, bytes, GiB/s,
# ranks, counts: defined beside the strategy fields, which this schema includes);
# `studyctl.definition.result.plausibility`
# holds each to its unit's bound and to what the point's plan fixes, walking these models.


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankSplit(_Strict):
    """Where one rank's time of one checkpoint went, summed over its files (the time split): a metadata-bound layout
    shows as open and fsync time, a data-bound one as transfer time. The parts need not add up to the rank's
    duration exactly: the rest (`other_s`) is Python and MPI between the calls."""

    open_s: Seconds  # os.open (write: create and truncate; read: open, fstat, fadvise) of every file
    transfer_s: Seconds  # pwrite / preadv calls (and the stamping of pages between them)
    fsync_s: Seconds  # fsync of every file (0 for reads and for fsync: false)
    close_s: Seconds  # os.close of every file
    other_s: Seconds  # duration_s minus the four above, floored at 0


class RankRequests(_Strict):
    """One rank's requests to an object store in one checkpoint or restore (studyctl.objstore.counts.RequestCounts:
    each logical request once, however many attempts it took)."""

    put: Count  # PutObject, plus each multipart upload's CreateMultipartUpload and CompleteMultipartUpload
    part: Count  # UploadPart
    get: Count  # GetObject: one per ranged read of part_mib
    head: Count  # HeadObject / HeadBucket
    list: Count  # ListObjectsV2 / ListMultipartUploads pages
    delete: Count  # DeleteObject(s), AbortMultipartUpload
    retries: Count  # attempts beyond the first, of any kind
    throttled: Count  # answers 503 SlowDown or 429, retried or not
    first_byte_s: Seconds | None = None  # the phase's first GET: from sending it to its first body byte


class RankTiming(_Strict):
    """One rank's share of one checkpoint."""

    rank: Rank
    host: str  # the node the rank ran on (a simulated node name on the local backend)
    start_s: Seconds  # MPI.Wtime anchored to the epoch per rank; seconds since the earliest rank start
    end_s: Seconds  # same clock as start_s
    bytes: Bytes  # this rank's own bytes (0 for a rank with nothing to write, e.g. ZeRO-0 beyond replica 0)
    files: Count  # files this rank wrote or read
    duration_s: Seconds  # end_s - start_s
    bandwidth_GiBps: Rate  # this rank's own bytes / duration_s / 2^30; 0 for a rank that moved no bytes
    split: RankSplit | None = None  # where duration_s went (None in older results); see worker.io.Split
    # an object store (filesystem kind s3): the rank's requests; None on POSIX filesystems and in older results.
    # Its split: transfer_s is every request of its objects, open/fsync/close are 0 (worker.objects)
    requests: RankRequests | None = None


class CheckpointTiming(_Strict):
    """One checkpoint write or one restore, over all ranks."""

    phase: Phase
    index: Count  # 0-based checkpoint (write) or restore (read) number
    step_dir: str  # relative to the point directory, e.g. "global_epoch1_step3" (DLIO naming)
    bytes: Bytes  # written (or read) by all ranks in this checkpoint
    files: Count  # over all ranks
    duration_max_s: Seconds  # the slowest rank's own duration: MLPerf's checkpoint duration (max over processes)
    span_s: Seconds  # max end - min start over ranks: the time the job as a whole was checkpointing
    aggregate_GiBps: Rate  # bytes / span_s / 2^30
    # min / max over ranks that moved bytes of a rank's OWN bytes / its duration (bandwidth_GiBps). Not MLPerf's
    # throughput, which divides the global size by each rank's duration: bytes / duration_max_s / 2^30.
    rank_bandwidth_min_GiBps: Rate
    rank_bandwidth_max_GiBps: Rate
    ranks: list[RankTiming]
    # Restores only: right before the read, of `pages_sampled` pages sampled over the files it reads (mincore),
    # how many were already in the page cache: the evidence that a read is cold (0) or served from memory.
    # None: not sampled (a write, an object store, a result written before the sample existed).
    resident_pages_before: Count | None = None
    pages_sampled: Count | None = None


def mlperf_throughput_GiBps(t: CheckpointTiming) -> float:
    """MLPerf's throughput of one checkpoint: min over processes of global size / the rank's duration."""
    return t.bytes / t.duration_max_s / GIB if t.duration_max_s > 0 else 0.0


OLD_SUMMARY_NAMES = {"mlperf_duration_max_s": "duration_max_s",  # PhaseSummary's names before the renames
                     "mlperf_throughput_min_GiBps": "rank_bandwidth_min_GiBps"}


class PhaseSummary(_Strict):
    """Statistics over the checkpoints of one phase of this point."""

    checkpoints: Positive  # checkpoints of this phase
    bytes_per_checkpoint: Bytes  # the first checkpoint's bytes (every checkpoint of a phase moves the same)
    aggregate_GiBps_mean: Rate  # mean over checkpoints of aggregate_GiBps (a mean of rates, not bytes / time)
    aggregate_GiBps_stdev: Rate  # sample stdev (n-1); 0 for one checkpoint
    aggregate_GiBps_min: Rate  # over checkpoints
    aggregate_GiBps_max: Rate
    duration_s_mean: Seconds  # mean over checkpoints of duration_max_s
    duration_s_stdev: Seconds  # sample stdev (n-1) of duration_max_s; 0 for one checkpoint
    # max over checkpoints of duration_max_s (was named mlperf_duration_max_s before it got MLPerf's meaning)
    duration_max_s: Seconds
    # min over checkpoints of rank_bandwidth_min_GiBps (was mlperf_throughput_min_GiBps; not MLPerf's throughput)
    rank_bandwidth_min_GiBps: Rate
    # MLPerf / DLIO, per checkpoint then the mean over checkpoints: duration = max over processes of a rank's
    # duration; throughput = min over processes of the global checkpoint size / that rank's duration, in GiB/s.
    # None in results written before these fields existed.
    mlperf_duration_s_mean: Seconds | None = None
    mlperf_throughput_GiBps_mean: Rate | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """Results written before the renames still validate."""
        if isinstance(data, dict):
            for old, new in OLD_SUMMARY_NAMES.items():
                if old in data and new not in data:
                    data = {**{k: v for k, v in data.items() if k != old}, new: data[old]}
        return data


class DlioCompat(_Strict):
    """DLIO's summary.json metrics computed DLIO's way, in GiB: per checkpoint rank 0's duration and the global
    checkpoint size / it; then the mean (population stdev) over checkpoints of those rates and durations."""

    checkpoint_size_GB: GiBSize
    save_checkpoint_io_mean_GB_per_second: Rate | None = None
    save_checkpoint_io_stdev_GB_per_second: Rate | None = None
    save_checkpoint_duration_mean_seconds: Seconds | None = None
    save_checkpoint_duration_stdev_seconds: Seconds | None = None
    load_checkpoint_io_mean_GB_per_second: Rate | None = None
    load_checkpoint_io_stdev_GB_per_second: Rate | None = None
    load_checkpoint_duration_mean_seconds: Seconds | None = None
    load_checkpoint_duration_stdev_seconds: Seconds | None = None


class FilesystemInfo(_Strict):
    """Where the checkpoints went, from /proc/self/mountinfo and statvfs on rank 0."""

    name: str  # the sweep's filesystem key
    path: str  # the directory written in
    mount_point: str
    fstype: str  # e.g. ext4, lustre; tmpfs means memory, not storage
    source: str  # the mounted device or server
    mount_options: str
    free_bytes_before: Bytes  # before the first write
    free_bytes_after: Bytes  # after the last restore
    total_bytes: Bytes


class SlurmInfo(_Strict):
    """The Slurm job as its environment named it (SLURM_* variables); None fields were not set."""

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
    world_size: Ranks  # MPI ranks that ran
    ranks_per_node: Ranks
    slurm: SlurmInfo | None = None  # None outside Slurm
    python_version: str
    mpi4py_version: str
    mpi_library_version: str  # MPI.Get_library_version(), first line
    kernel: str  # uname release
    studyctl_version: str
    started_at: str  # ISO 8601 UTC
    finished_at: str  # ISO 8601 UTC
    host_memory_bytes: Bytes | None = None  # the smallest host's physical memory (MLPerf's page-cache rule)
    # What shared the host's cores (None in older results): a flag when ranks and background threads outnumber them.
    host_cores: Positive | None = None  # cores this host lets the job use (the ranks' CPU affinity; smallest host)
    ranks_on_host: Ranks | None = None  # ranks of this job on one host (most on any host; all on simulated nodes)
    background_threads_on_host: Count | None = None  # persist/drain threads on one host at once (most; sync: 0)
    launch_s: Seconds | None = None  # earliest rank process start → every rank ready after MPI init
    # How rank 0's host hands idle memory back to a hypervisor (studyctl.host.memory_return): calls that take fresh
    # memory vary with it. None: the kernel shows none, or an older result.
    memory_return: str | None = None


class IoInfo(_Strict):
    """How the I/O was done: what was asked and what ran."""

    io_mode_requested: str  # the point's io_mode
    io_mode_used: str  # differs only when direct_fallback was allowed and O_DIRECT refused
    direct_fallback_reason: str | None = None  # why O_DIRECT was refused, when it was
    # how restores avoided the page cache (none: warm; no_cache: an object store, no client cache to avoid)
    cold_read_method: ColdReadMethod
    restore_mode: RestoreMode  # rank: own files (DLIO); full: every DP replica reads the weights; broadcast: one
    # replica reads and MPI_Bcasts them to the others (definition.checkpoint.restore_rules)
    rank_shift: Count  # rank r restored rank r+shift's files
    buffer_bytes: Bytes  # the one reused buffer per rank
    block_bytes: Bytes  # bytes per write/read call
    fsync_per_file: bool  # every written file fsynced before the rank's end stamp; false mirrors DLIO: "no fsync"
    naming: Naming = "dlio"  # file and folder names written
    subset_world_size: Ranks | None = None  # MLPerf subset mode: the full run this point wrote a share of
    # an object store: what was done about the server's own cache before each cold restore (studyctl.objstore.cache:
    # the project's local server has its volume files evicted from the page cache; any other server's is its own)
    server_cache: str | None = None


class SizeInfo(_Strict):
    """The checkpoint's sizes from the planner (DLIO's layout rules)."""

    scale: Fraction  # every tensor shrunk by this factor; files, ranks and layout kept
    nominal_checkpoint_bytes: Bytes  # the full-size model's checkpoint
    written_checkpoint_bytes: Bytes  # what each checkpoint actually wrote (scaled)
    files_per_checkpoint: Count
    bytes_per_rank_max: Bytes  # over ranks that write
    bytes_per_rank_min: Bytes
    read_bytes_per_restore: Bytes  # larger than written with restore "full"


class CeilingInfo(_Strict):
    """What a resource shape reaches, measured by a ceiling point (`Point.role == "ceiling"`) through
    the same backend, nodes, ranks, filesystem, I/O mode and block as the study's points of that shape
    (`studyctl.definition.planning.shapes`). Rates are aggregate over all ranks unless named `_per_rank`; each is the
    median of its probe's rounds (`rounds`; definition.planning.ceilings: until the 95% CI is within CI_TARGET, within a
    budget). The storage probes are the fio pattern: every rank writes and fsyncs one file, then reads it back
    cold, each phase a stream of at most PROBE_MAX_BYTES of the shard per rank that stops at PROBE_STREAM_S."""

    shape: str  # Shape.key
    largest_shard_bytes: Bytes  # per rank: the largest bytes any rank of the shape's points writes
    even_bytes: Bytes  # per rank: the largest point's checkpoint spread evenly over the ranks
    repeats: Positive  # rounds of the storage probes (the result's checkpoints: the largest probe's, per phase)
    # one file per rank of largest_shard_bytes (streamed as far as the probe goes), written in the shape's I/O mode
    # and fsynced on the clock: on a buffered shape the durable buffered write, on a direct shape O_DIRECT
    storage_write_GiBps: Rate
    # the same files read back cold in the shape's way (`cold_read: auto`, the result's io.cold_read_method): a
    # buffered shape's evicted (fadvise) and read with readahead, a direct or hybrid shape's read with O_DIRECT
    storage_read_GiBps: Rate
    even_write_GiBps: Rate  # one file of even_bytes per rank (the largest's figure where even is within EVEN_SAME)
    even_read_GiBps: Rate
    # MPI point-to-point between ranks on different nodes (None: one node); on simulated nodes (the local backend,
    # provenance.simulated_nodes) this and the broadcast are the machine's shared memory through MPI, not a network
    network_p2p_GiBps: Rate | None = None
    network_bcast_GiBps: Rate | None = None  # MPI_Bcast from one rank, bytes delivered to the others per second
    memcpy_GiBps_per_rank: Rate  # host memory copy of largest_shard_bytes, every rank copying at once
    memcpy_GiBps: Rate  # the same, all ranks together
    # `ceilings: shared`: "<study>/points/<point>/attempt-<n>", the attempt of another study that measured these
    # figures (same shape, filesystem path and nodes); None: measured by this point itself
    reused_from: str | None = None
    # Per rate field of this model (its name as key), the aggregate rate of every round the probe ran, in order;
    # the field itself is their median. A ceiling is a distribution: its uncertainty comes from these. Empty in
    # results written before rounds were recorded.
    rounds: dict[str, list[Rate]] = {}


class Result(_Strict):
    """One attempt of one point, written atomically by rank 0 as result.json."""

    schema_version: SchemaVersion
    study: str
    point_id: str  # hash of `point` (its canonical form)
    attempt: Positive  # 1, 2, ... as the ledger numbered it
    point: Point  # every setting measured
    sizes: SizeInfo
    io: IoInfo
    checkpoints: list[CheckpointTiming]  # every write, then every restore
    summary: dict[Phase, PhaseSummary]
    dlio: DlioCompat
    filesystem: FilesystemInfo
    provenance: Provenance
    strategy: StrategyInfo | None = None  # absent in results from before strategies
    ceilings: CeilingInfo | None = None  # only in the results of ceiling points
    recovery: RecoveryTiming | None = None  # only in the results of recovery points (a restart after a failure)
    engine: EngineInfo | None = None  # only in the results of points with a checkpoint engine (torch_save, dcp)


# The worker's exit code when the results filesystem refused its error record (full, or over quota): the one
# way left to say so. mpiexec ORs its ranks' codes, so the backend also looks at the filesystem itself.
RECORD_REFUSED_EXIT = 28


class WorkerError(_Strict):
    """Written (atomically, by rank 0) instead of a result on a failure the worker understood."""

    schema_version: SchemaVersion
    point_id: str
    attempt: int
    failure_class: str  # a studyctl.states.FailureClass value
    reason: str  # one line, with the numbers
