"""What a checkpoint strategy needs before it can run: host memory for async snapshots, a surviving tier."""

from __future__ import annotations

from studyctl.definition.catalog import ModelSpec
from studyctl.definition.layout import Parallelism, summarize
from studyctl.definition.points import CheckpointOptions
from studyctl.definition.sweep import Estimate
from studyctl.units import GIB, MIB, format_bytes

# Resident memory of one worker rank besides its buffer (Python, mpi4py, MPICH), measured ~80 MiB.
WORKER_BASE_BYTES = 96 * MIB


def memory_per_host_bytes(opts: CheckpointOptions, ranks_per_node: int, bytes_per_rank_max: int) -> int:
    """What the worker holds per host: buffer + interpreter, an async snapshot and the simulated device state it
    copies (worker.persist.Snapshot), a tier drain buffer."""
    snapshot = 2 * bytes_per_rank_max if opts.strategy == "async" else 0
    drain_buffer = opts.buffer_mib * MIB if opts.strategy == "tiered" else 0
    return ranks_per_node * (opts.buffer_mib * MIB + WORKER_BASE_BYTES + snapshot + drain_buffer)


def strategy_problems(model: ModelSpec, par: Parallelism, nodes: int, ranks_per_node: int, opts: CheckpointOptions,
                      estimate: Estimate) -> list[str]:
    """Why a strategy cannot run on this point (empty when it can); the layout must be feasible."""
    out = []
    if opts.strategy == "async" and estimate.host_memory_gib is not None:
        need = memory_per_host_bytes(opts, ranks_per_node, summarize(model, par, opts.scale).bytes_per_rank_max)
        have = estimate.host_memory_gib * GIB
        if need > have:
            out.append(f"async snapshots need {format_bytes(need)} of host memory per node "
                       f"({ranks_per_node} rank(s) × state + buffer), estimate.host_memory_gib is "
                       f"{format_bytes(have)}")
    return out
