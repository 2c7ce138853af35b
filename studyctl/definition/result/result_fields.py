"""Result fields of checkpoint strategies and restore modes (part of the result schema, `result_schema.py`).

Per checkpoint the phase's own timing (`CheckpointTiming`) runs from the barrier to the moment the
checkpoint is durable on shared storage; these fields split that time into what training waited for
(`blocking_s`) and what ran beside training (`background_s`), and restores into storage reads and
broadcasts. Seconds are the slowest rank's unless named `_mean`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from studyctl.definition.inputs.vocabulary import (
    DrainBy,
    FrameworkEngine,
    Launcher,
    Phase,
    ReplicatedWriter,
    RestoreMode,
    StateConvention,
    StateDevice,
    Strategy,
)


@dataclass(frozen=True)
class Unit:
    """What a numeric result field measures. Every number in a result carries one: its plausibility bound comes
    from it (`definition.result.plausibility`), so a field added with a unit is checked without being listed."""

    name: str


# Field constraints of the whole result schema: a damaged file with NaN, infinite or negative figures fails
# validation; each type's Unit gives the upper bound no true figure reaches.
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False), Unit("s")]  # durations and clock offsets
SignedSeconds = Annotated[float, Field(allow_inf_nan=False), Unit("±s")]  # a time lost, or gained (below 0)
Rate = Annotated[float, Field(ge=0, allow_inf_nan=False), Unit("GiB/s")]
GiBSize = Annotated[float, Field(ge=0, allow_inf_nan=False), Unit("GiB")]  # DLIO's "GB"
Bytes = Annotated[int, Field(ge=0), Unit("B")]
Count = Annotated[int, Field(ge=0), Unit("count")]  # files, requests, steps, indexes
Positive = Annotated[int, Field(ge=1), Unit("count")]  # a count no result has zero of (attempts, repeats)
Ranks = Annotated[int, Field(ge=1), Unit("ranks")]  # a world, a node's ranks, a parallel degree
Rank = Annotated[int, Field(ge=0), Unit("ranks")]  # a rank's number (0-based)
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False), Unit("fraction")]  # a scale factor
Share = Annotated[float, Field(ge=0, allow_inf_nan=False), Unit("ratio")]  # CPU time / wall time (threads: > 1)
Ratio = Annotated[float, Field(gt=-1, allow_inf_nan=False), Unit("ratio")]  # a slowdown (above −1: no step is free)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StrategyTiming(_Strict):
    phase: Phase
    index: Count
    # write: training blocked (snapshot copy, tier write, or the whole sync write), then background work
    blocking_s: Seconds = 0.0
    background_s: Seconds = 0.0  # persist (async) or drain (tiered): its slowest rank
    background_bytes: Bytes = 0  # written to shared storage in the background, all ranks
    background_GiBps: Rate = 0.0  # background_bytes / background_s
    # The simulated training beside the background work (worker.compute, worker.interference): steps during
    # the window vs idle steps right before and after it. Signed, never clamped; means over ranks.
    compute_steps: Count = 0  # simulated training steps run beside the background work, all ranks
    compute_step_s_mean: Seconds | None = None  # their mean duration
    compute_slowdown: Ratio | None = None  # mean over ranks of (window step mean / the rank's idle step mean − 1)
    interference_s: SignedSeconds = 0.0  # mean over ranks of (window step time − its steps × idle step mean)
    idle_step_s_mean: Seconds | None = None  # mean over ranks of their idle step mean (None in older results)
    interference_ci_s: Seconds | None = None  # 95% CI half-width of interference_s from the step samples
    allreduce_bytes: Bytes = 0  # gradient bytes all-reduced by the window's steps, all ranks
    # CPU time / wall time of the window's compute: accelerator its dispatch share, cpu ~1 (dispatch + kernels)
    compute_cpu_share: Share | None = None
    # read: where the bytes came from, and how long reading and broadcasting took
    tier_bytes: Bytes = 0  # read from a node-local tier
    shared_bytes: Bytes = 0  # read from shared storage
    read_s: Seconds = 0.0  # slowest rank's time in storage reads
    broadcast_s: Seconds = 0.0  # the slowest reading rank's time in MPI_Bcast (the transfer to its replicas)
    broadcast_bytes: Bytes = 0  # received through broadcasts, all ranks


class StrategyInfo(_Strict):
    strategy: Strategy
    restore_mode: RestoreMode
    step_s: Seconds | None = None  # the training step asked for
    compute_step_s_idle: Seconds | None = None  # mean over ranks of the calibrated step with nothing beside it
    snapshot_bytes_per_rank_max: Bytes = 0  # async: host memory per rank
    tier_path: str | None = None
    tier_io_mode: str | None = None  # the tier's I/O mode (buffered where it refuses O_DIRECT)
    tier_fstype: str | None = None  # the tier's mount type (/proc/self/mountinfo on rank 0), e.g. tmpfs, xfs
    drain: DrainBy | None = None
    tier_keep: Positive | None = None
    replaced_nodes: Count = 0
    checkpoints: list[StrategyTiming] = []


class RecoveryTiming(_Strict):
    """A restart after a failure: a new launch of the restart world restores the checkpoint the point
    wrote and runs its first training step. Each phase is the whole job's: launch = from just before the launcher
    (mpiexec, srun) is invoked until every rank has passed MPI init (the launcher's wall clock against each rank's;
    on simulated nodes one machine's clock, on a cluster the nodes' clocks, which differ by their sync error);
    restore = the slowest rank's end − the first rank's start of the reads (and broadcasts); ready = a barrier and
    one simulated training step; setup = the rest of the wall time between them that a restart does too (reading
    the task and the written result, mapping nodes, allocating the I/O buffer, building the step). So
    time_to_first_step_s, their sum, is the launcher's stamp to the last rank's end of the first step, less only
    `prepare_s`: the cold-read preparation (page eviction) a study adds and a real restart does not, reported apart.
    Results from before setup was recorded have 0 there (their sum then left setup off the clock)."""

    scenario: str  # the sweep's words: same, lost_nodes N, shrink_to RANKS[, tensor_parallel T], grow_to RANKS
    launcher: Launcher
    shared_clock: bool  # every rank and the launcher read one machine's clock (simulated nodes)
    step_dir: str  # the checkpoint restored
    old_world_size: Ranks
    old_tensor_parallel: Ranks
    old_pipeline_parallel: Ranks
    old_data_parallel: Ranks
    new_world_size: Ranks
    new_tensor_parallel: Ranks
    new_pipeline_parallel: Ranks
    new_data_parallel: Ranks
    lost_nodes: Count = 0
    launch_s: Seconds
    restore_s: Seconds
    read_s: Seconds  # the slowest rank's time in storage reads
    broadcast_s: Seconds = 0.0  # the slowest reading rank's time in MPI_Bcast (restore broadcast)
    ready_s: Seconds
    setup_s: Seconds = 0.0  # the wall time between the phases (see above): counted
    prepare_s: Seconds = 0.0  # the slowest rank's cold-read preparation before the restore: not counted
    step_s: Seconds  # the simulated step's compute (training.simulated_step.compute_s)
    time_to_first_step_s: Seconds  # launch_s + setup_s + restore_s + ready_s
    bytes_read: Bytes  # from files, all ranks
    bytes_restored_per_rank: list[Bytes]  # by new rank: read from files, or received by broadcast
    files_opened: Count  # all ranks
    files_opened_per_rank: list[Count]
    tier_bytes: Bytes = 0  # of bytes_read, from a node-local tier
    broadcast_bytes: Bytes = 0  # received through broadcasts, all ranks


class EngineTiming(_Strict):
    """One checkpoint or restore through a checkpoint engine, over all ranks. The framework's share of a rank's
    time is `engine_s` − `storage_s`: what serialising, copying and the engine's own threads took beside the
    storage calls. Seconds are the slowest rank's."""

    phase: Phase
    index: Count
    bytes: Bytes  # the engine's files written (or read: DCP's records and every rank's `.metadata`), all ranks
    files: Count  # files written (or read), all ranks
    engine_s: Seconds  # the engine's call: save, load, or an async save's from the call to its files complete
    # time inside the storage seam's calls (torch_save streams: files or objects); None: the engine wrote its
    # paths itself (dcp), where the report compares with `stream` on the same shape instead
    storage_s: Seconds | None = None
    blocked_s: Seconds | None = None  # async: the engine's async call, what training waited for
    staged_s: Seconds | None = None  # async: from the call until the state was copied off the live tensors
    persist_s: Seconds | None = None  # async: from the call until the files were complete
    verified: bool | None = None  # reads: the restored tensors were compared with the saved ones (and equal)
    # sync saves and restores, the most of any rank: the process's CPU seconds in the call (all its threads) and the
    # minor page faults it took (fresh pages its host copies touched, or pages mapped from the page cache)
    cpu_s: Seconds | None = None
    minor_faults: Count | None = None


class EngineInfo(_Strict):
    """How a point of `checkpoint.engine` torch_save or dcp saved and restored its real tensors."""

    engine: FrameworkEngine
    device: StateDevice  # asked for
    on_gpu: bool  # the tensors really were on a GPU (false on every machine without one)
    state: StateConvention
    replicated_writer: ReplicatedWriter
    torch_version: str
    tensors_per_rank_max: Count  # tensors a rank saved
    tensor_bytes_per_rank_max: Bytes  # their bytes (the rank's files' payload)
    checkpoints: list[EngineTiming] = []
