"""Does a point fit this machine? Its ranks against the cores, its buffers against the available memory.

Simulated nodes share one machine, so a little oversubscription is normal (ranks mostly wait on I/O); a
thousand ranks on two cores, or buffers beyond the free memory, would only measure the swap and the
scheduler, or hang the machine. Refused before any process starts, with the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from studyctl import host
from studyctl.definition.checkpoint.engines import engine_tensor_bytes
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.planning.ceilings import ceiling_memory_bytes
from studyctl.definition.planning.recovery_plan import running_ranks
from studyctl.definition.planning.strategies import memory_per_host_bytes
from studyctl.units import format_bytes


@dataclass(frozen=True)
class Machine:
    cores: int
    available_memory_bytes: int | None  # host.available_memory(), as plan's capacity; None: the kernel does not say

    @classmethod
    def this(cls) -> Machine:
        return cls(host.cores(), host.available_memory())


def misfit(point: Point, machine: Machine, ranks_per_core: int) -> str | None:
    """Why `point` cannot run on `machine` (all its simulated nodes at once), or None if it fits."""
    ranks = running_ranks(point)  # a recovery point's larger world (recovery after a failure)
    limit = machine.cores * ranks_per_core
    if ranks > limit:
        return (f"{ranks} ranks ({ranks // point.ranks_per_node} nodes × {point.ranks_per_node}) exceed this machine's "
                f"{machine.cores} cores × local.max_ranks_per_core {ranks_per_core} = {limit} ranks")
    # every simulated node's ranks on this one host: buffers, interpreters, drain buffers, and async snapshots
    # of every rank's shard (the whole checkpoint)
    need = ceiling_memory_bytes(point, ranks) if point.role == "ceiling" else \
        memory_per_host_bytes(point.checkpoint, ranks, point.layout().total_bytes,
                              engine_tensor_bytes(point.model, point.parallelism, point.world_size, point.checkpoint))
    have = machine.available_memory_bytes
    if have is not None and need > have:
        return (f"{ranks} ranks need {format_bytes(need)} of memory here ({point.checkpoint.buffer_mib} MiB buffer "
                f"+ interpreter per rank, plus snapshots for strategy {point.checkpoint.strategy}"
                f"{_tensors(point.checkpoint.engine)}), over this "
                f"machine's available {format_bytes(have)}")
    return None


def _tensors(engine: str) -> str:
    return "" if engine == "stream" else f", and engine {engine}'s real tensors: state, snapshot, restored state"
