"""What a checkpoint strategy needs before it can run: host memory for async snapshots, a surviving tier."""

from __future__ import annotations

from functools import lru_cache

from studyctl.definition.checkpoint.engines import engine_tensor_bytes
from studyctl.definition.checkpoint.layout import DEFAULT_CONVENTION, Convention, Parallelism, rank_files, rank_key
from studyctl.definition.checkpoint.points import CheckpointOptions
from studyctl.definition.inputs.catalog import ModelSpec
from studyctl.definition.planning.sweep import Estimate
from studyctl.units import GIB, MIB, format_bytes

# Resident memory of one worker rank besides its buffer (Python, mpi4py, MPICH), measured ~80 MiB.
WORKER_BASE_BYTES = 96 * MIB


def memory_per_host_bytes(opts: CheckpointOptions, ranks: int, snapshot_bytes: int, tensor_bytes: int = 0) -> int:
    """What `ranks` worker ranks hold together: buffer + interpreter each, a tier drain buffer each, and for
    async the snapshot of their own shards (`snapshot_bytes`, see host_snapshot_bytes) twice: the snapshot and
    the simulated device state it copies (worker.persist.Snapshot); an engine point instead holds its real
    tensors, snapshot and restored state included (`tensor_bytes`: engines.engine_tensor_bytes)."""
    drain_buffer = opts.buffer_mib * MIB if opts.strategy == "tiered" else 0
    snapshot = 2 * snapshot_bytes if opts.strategy == "async" and opts.engine == "stream" else 0
    return ranks * (opts.buffer_mib * MIB + WORKER_BASE_BYTES + drain_buffer) + snapshot + tensor_bytes


@lru_cache(maxsize=4096)
def host_snapshot_bytes(m: ModelSpec, par: Parallelism, ranks_per_node: int, scale: float = 1.0,
                        conv: Convention = DEFAULT_CONVENTION) -> int:
    """The largest sum of the real per-rank checkpoint bytes over the ranks of one host (rank r on host
    r // ranks_per_node): under ZeRO-1/2 only data-parallel replica 0 holds the weights, so one host holds far
    more than another. A rank's bytes depend on r mod TP·PP past replica 0, so the hosts over replica 0 and
    one period after it (at most TP·PP hosts), plus the last, cover every distinct host; spread pieces change
    size with the DP index too, so then every host is summed."""
    mp = par.model_parallel
    per_rank: dict[tuple[int, int], int] = {}
    key = rank_key(m, par, scale, conv)

    def rank_bytes(rank: int) -> int:
        k = key(rank)
        if k not in per_rank:
            per_rank[k] = sum(f.nbytes for f in rank_files(m, par, rank, scale, conv=conv))
        return per_rank[k]

    hosts = -(-par.ranks // ranks_per_node)
    first = -(-mp // ranks_per_node)
    candidates = set(range(hosts)) if conv.spread else set(range(min(hosts, first + mp))) | {hosts - 1}
    return max(sum(rank_bytes(r) for r in range(h * ranks_per_node, min(par.ranks, (h + 1) * ranks_per_node)))
               for h in candidates)


def host_memory_bytes(m: ModelSpec, par: Parallelism, ranks_per_node: int, opts: CheckpointOptions) -> int:
    """What the workers of the busiest host hold (`memory_per_host_bytes` of its snapshot and engine tensors)."""
    return memory_per_host_bytes(opts, ranks_per_node,
                                 host_snapshot_bytes(m, par, ranks_per_node, opts.scale, opts.convention),
                                 engine_tensor_bytes(m, par, ranks_per_node, opts))


def strategy_problems(model: ModelSpec, par: Parallelism, nodes: int, ranks_per_node: int, opts: CheckpointOptions,
                      estimate: Estimate) -> list[str]:
    """Why a strategy cannot run on this point (empty when it can); the layout must be feasible."""
    out = []
    if opts.strategy == "async" and estimate.host_memory_gib is not None:
        need = host_memory_bytes(model, par, ranks_per_node, opts)
        have = estimate.host_memory_gib * GIB
        if need > have:
            out.append(f"async snapshots need {format_bytes(need)} of host memory per node "
                       f"(the shards of its {ranks_per_node} rank(s) + buffers), estimate.host_memory_gib is "
                       f"{format_bytes(have)}")
    return out
