"""A ceiling point's network and host-memory probes, on the rank's one buffer, and the rounds every
probe runs (`repeat`: definition.planning.ceilings.another_round, the rule plan estimates with).

Each moves `nbytes` per rank per round: the ceiling passes the largest shard up to
definition.planning.ceilings.MEMCPY_MAX_BYTES (a stream's rate, reached well within it).

Network: what a broadcast restore could reach between nodes. Point-to-point: the ranks of node 2k each send
those bytes to the rank of the same place on node 2k+1, every pair at once; broadcast: rank 0 sends the
same bytes to every rank with MPI_Bcast. Both are delivered bytes / the time from the first rank's start to the
last rank's end; None on one node. On simulated nodes (the local backend: provenance.simulated_nodes) the
"network" is the machine's shared memory through MPI, not a wire.

Memory copy: what an async snapshot could reach: every rank copies its bytes at once the way
worker.persist.Snapshot.fill does, one memmove (slice assignment) from a state into a snapshot, in pieces of at
most definition.planning.ceilings.MEMCPY_MAX_BYTES (so the probe's memory stays bounded; plan counts it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from studyctl.definition.planning.ceilings import MAX_ROUNDS, STREAM_BUDGET_S, another_round, copy_piece
from studyctl.units import GIB
from worker import io
from worker.persist import Snapshot

Rounds = dict[str, list[float]]  # a CeilingInfo rate field's name → its rate in every round, in order


def repeat(comm: Any, budget_s: float, one: Callable[[int], dict[str, float]], max_rounds: int = MAX_ROUNDS,
           ramp: int = 0) -> Rounds:
    """Every rank: `ramp` rounds of `one` (round index → each rate it measured, the same on every rank), not
    recorded, then recorded rounds until the probe rule says enough; rank 0's clock counts the budget (the ramp
    on it) and its answer is everyone's."""
    got: Rounds = {}
    began = time.monotonic()
    for r in range(ramp):
        one(r)
    longest = 0.0
    done = 0
    while True:
        start = time.monotonic()
        for name, rate in one(ramp + done).items():
            got.setdefault(name, []).append(rate)
        done += 1
        longest = max(longest, time.monotonic() - start)
        more = another_round(got, done, time.monotonic() - began, longest, budget_s, max_rounds) \
            if comm.Get_rank() == 0 else None
        if not comm.bcast(more, root=0):
            return got


def _timed(comm: Any, work: Callable[[], int]) -> list[tuple[float, float, int]]:
    """Barrier, then `work` on every rank at once: every rank's (start, end, bytes it counts), epoch seconds."""
    from mpi4py import MPI

    anchor = time.time() - MPI.Wtime()
    comm.Barrier()
    start = MPI.Wtime()
    nbytes = work()
    end = MPI.Wtime()
    return comm.allgather((start + anchor, end + anchor, nbytes))


def _aggregate(stamps: list[tuple[float, float, int]]) -> float:
    span = max(e for _, e, _ in stamps) - min(s for s, _, _ in stamps)
    return sum(n for _, _, n in stamps) / span / GIB if span > 0 else 0.0


def _pieces(nbytes: int, size: int) -> list[int]:
    return [min(size, nbytes - off) for off in range(0, nbytes, size)]


def network(comm: Any, buf: io.Buffer, nbytes: int, node: str, max_rounds: int = MAX_ROUNDS) -> Rounds:
    """Point-to-point and broadcast rates of `nbytes`, every round (nothing on one node): network_p2p_GiBps,
    network_bcast_GiBps."""
    names = comm.allgather(node)
    order = sorted(set(names))
    if len(order) < 2:
        return {}
    rank = comm.Get_rank()
    mine = [r for r, n in enumerate(names) if n == node]
    index = order.index(node)
    partner_node = index ^ 1  # 0↔1, 2↔3, ...; an odd last node sits out
    peers = [r for r, n in enumerate(names) if n == order[partner_node]] if partner_node < len(order) else []
    place = mine.index(rank)
    peer = peers[place] if place < len(peers) else None
    pieces = _pieces(nbytes, buf.size)

    def p2p() -> int:
        if peer is None:
            return 0
        for n in pieces:
            if index % 2 == 0:
                comm.Send(buf.view[:n], dest=peer, tag=7)
            else:
                comm.Recv(buf.view[:n], source=peer, tag=7)
        return nbytes if index % 2 else 0  # counted where delivered

    def bcast() -> int:
        for n in pieces:
            comm.Bcast(buf.view[:n], root=0)
        return 0 if rank == 0 else nbytes

    return {**repeat(comm, STREAM_BUDGET_S, lambda _: {"network_p2p_GiBps": _aggregate(_timed(comm, p2p))},
                     max_rounds),
            **repeat(comm, STREAM_BUDGET_S, lambda _: {"network_bcast_GiBps": _aggregate(_timed(comm, bcast))},
                     max_rounds)}


def memcpy(comm: Any, nbytes: int, max_rounds: int = MAX_ROUNDS) -> Rounds:
    """Every rank copies `nbytes` at once, in pieces of definition.planning.ceilings.copy_piece, one memmove each; every
    round's memcpy_GiBps_per_rank (mean over ranks of a rank's bytes / its own duration) and memcpy_GiBps (every
    rank's bytes / (last end - first start))."""
    piece = copy_piece(nbytes)
    snapshot = Snapshot([piece])
    pieces = _pieces(nbytes, piece)

    def copy() -> int:
        for n in pieces:
            if n == piece:
                snapshot.fill()
            else:  # the last, shorter piece
                snapshot.view[:n] = snapshot.state_view[:n]
        return nbytes

    def one(r: int) -> dict[str, float]:
        snapshot.prepare(r)  # off the clock: every page resident, as an async point's prepare does
        stamps = _timed(comm, copy)
        per_rank = statistics.fmean(n / (e - s) / GIB for s, e, n in stamps if e > s)
        return {"memcpy_GiBps_per_rank": per_rank, "memcpy_GiBps": _aggregate(stamps)}

    try:
        return repeat(comm, STREAM_BUDGET_S, one, max_rounds)
    finally:
        snapshot.close()
