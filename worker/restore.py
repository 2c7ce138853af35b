"""Restores that are more than every rank reading its files: from a node-local tier when its copy is
there (else from shared storage, as on a node replaced after a failure), and `broadcast`: one rank of
each group of data-parallel replicas reads the replicated files (weights; with ZeRO 0 the optimizer
too) and MPI_Bcasts them chunk by chunk to the others, who read only the shards that are theirs alone.
Every rank ends with what restore `full` gives it; reads and broadcasts are timed apart.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyctl.definition.checkpoint.layout import CheckpointFile, Parallelism, rank_files, replica_files
from studyctl.definition.checkpoint.points import Point, replicated_kinds
from studyctl.definition.checkpoint.restore_rules import restore_rule
from studyctl.definition.result.result_fields import StrategyTiming
from worker import io, residency
from worker.persist import aligned
from worker.storage import FileChunks

if TYPE_CHECKING:
    from worker.storage import Storage
    from worker.storage.base import Chunks

Describe = Callable[[OSError, str], tuple[str, str]]
# Per rank and restore: (tier_bytes, shared_bytes, read_s, broadcast_s, broadcast_bytes)
ReadExtra = tuple[int, int, float, float, int]


def broadcast_split(point: Point, par: Parallelism, rank: int) -> tuple[int, list[CheckpointFile],
                                                                          list[CheckpointFile]]:
    """(group colour, files this rank reads itself, files its group broadcasts) for restore broadcast."""
    opts = point.checkpoint
    source = (rank + opts.rank_shift) % par.ranks
    kinds = replicated_kinds(par.zero_stage)
    conv = opts.convention
    own = [f for f in rank_files(point.model, par, source, opts.scale, opts.naming, conv) if f.kind not in kinds]
    colour = source % par.model_parallel
    return colour, own, replica_files(point.model, par, colour, opts.scale, opts.naming, conv)


@dataclass
class Restorer:
    """The timed part of a restore on one rank, for tiered points and broadcast restores."""

    point: Point
    comm: Any
    reads: list[CheckpointFile]  # what restore rank or full reads on this rank
    buf: io.Buffer
    cold_read: str  # direct, fadvise or none: how tier reads are made cold (shared storage knows its own)
    storage: Storage  # shared storage: files or objects
    tier_dir: Path | None  # this node's tier directory for the point, when tiered
    tier_direct: bool  # the tier accepts O_DIRECT
    describe: Describe
    wtime: Callable[[], float]

    def __post_init__(self) -> None:
        opts = self.point.checkpoint
        self.rank = self.comm.Get_rank()
        self.block = opts.block_mib * (1 << 20)
        par = self.point.parallelism
        if restore_rule(opts.restore).broadcasts:
            colour, self.own, self.shared = broadcast_split(self.point, par, self.rank)
            self.group = self.comm.Split(color=colour, key=self.rank)
        else:
            self.own, self.shared, self.group = self.reads, [], None

    def locate(self, step: str, name: str) -> tuple[str, bool]:
        """(path or URL, from the tier?): the tier's copy when this node still has it, else shared storage's."""
        if self.tier_dir is not None:
            local = self.tier_dir / step / name
            if local.exists():
                return str(local), True
        return self.storage.where(step, name), False

    def _sources(self, step: str) -> tuple[list[str], list[str]]:
        """(tier paths, shared storage's file names) this rank reads itself in a restore of `step`."""
        reads = self.own + (self.shared if self.group is not None and self.group.Get_rank() == 0 else [])
        tier: list[str] = []
        shared: list[str] = []
        for f in reads:
            path, from_tier = self.locate(step, f.name)
            tier.append(path) if from_tier else shared.append(f.name)
        return tier, shared

    def prepare(self, step: str) -> None:
        """Off the clock: evict the tier copies this rank will read (a no-op for O_DIRECT and on tmpfs); shared
        storage's files made cold as the point reads them (evicted; or the server's cache dropped by rank 0)."""
        tier, shared = self._sources(step)
        for path in tier:
            io.evict(path)
        self.storage.make_cold(step, shared)

    def resident(self, step: str) -> tuple[int, int] | None:
        """Off the clock, after `prepare`: the residency sample of what this rank reads (worker.residency)."""
        tier, shared = self._sources(step)
        return residency.total([residency.resident(tier), self.storage.resident(step, shared) if shared else (0, 0)])

    def work(self, ph: Any, step: str) -> None:
        """ph.split: this rank's own storage reads (tier or shared); a broadcast's transfer is in `other_s`."""
        ph.split = split = self.storage.begin(ph)
        tier = shared = received = 0
        read_s = bcast_s = 0.0
        if self.group is not None:
            for f in self.shared:
                got, from_tier, r_s, b_s = self._broadcast_file(ph, step, f, split)
                read_s, bcast_s = read_s + r_s, bcast_s + b_s
                if self.group.Get_rank() == 0:
                    tier, shared = tier + got * from_tier, shared + got * (not from_tier)
                else:
                    received += got
                ph.bytes += got
                ph.files += 1
        for f in self.own:
            if ph.error is not None:
                break
            path, from_tier = self.locate(step, f.name)
            start = self.wtime()
            try:
                got = io.read_file(path, self.buf, self.block, self._direct(from_tier), split) if from_tier else \
                    self.storage.read_file(step, f, self.buf, split)
            except OSError as exc:
                ph.error = self.describe(exc, path)
                break
            read_s += self.wtime() - start
            tier, shared = tier + got * from_tier, shared + got * (not from_tier)
            ph.bytes += got
            ph.files += 1
        ph.extra = (tier, shared, read_s, bcast_s, received)

    def _direct(self, from_tier: bool) -> bool:
        return self.cold_read == "direct" and (self.tier_direct or not from_tier)

    def _open(self, step: str, f: CheckpointFile, path: str, from_tier: bool, split: io.Split) -> Chunks:
        return FileChunks(path, self._direct(from_tier), split) if from_tier else \
            self.storage.open_chunks(step, f, split)

    def _broadcast_file(self, ph: Any, step: str, f: CheckpointFile, split: io.Split
                        ) -> tuple[int, bool, float, float]:
        """Root: read a chunk, broadcast it; others: receive. The chunk sequence follows from the file size
        alone (padded for O_DIRECT whether or not it is used), so an error on the root still sends every
        chunk (and is voted on at the phase's end)."""
        from mpi4py import MPI

        root = self.group.Get_rank() == 0
        path, from_tier = self.locate(step, f.name)
        span = aligned(f.nbytes)
        source: Chunks | None = None
        if root and ph.error is None:
            try:
                source = self._open(step, f, path, from_tier, split)
            except OSError as exc:
                ph.error = self.describe(exc, path)
        read_s = bcast_s = 0.0
        view = self.buf.view
        try:
            for off in range(0, span, self.block):
                length = min(self.block, span - off)
                if source is not None:
                    start = self.wtime()
                    try:
                        source.read(off, view[:length])
                    except OSError as exc:
                        ph.error = self.describe(exc, path)
                        source.close()
                        source = None
                    read_s += self.wtime() - start
                start = self.wtime()
                self.group.Bcast([view[:length], MPI.BYTE], root=0)
                if root:  # the transfer; a receiver's time in Bcast also holds its wait for the root's read
                    bcast_s += self.wtime() - start
        finally:
            if source is not None:
                source.close()
        return f.nbytes, from_tier, read_s, bcast_s

    def replace_nodes(self, nodes: Any, count: int) -> None:
        replace_nodes(self.tier_dir, nodes, count)


def replace_nodes(tier_dir: Path | None, nodes: Any, count: int) -> None:
    """Off the clock, before the restores: the last `count` nodes lose their tier (a replaced node)."""
    if tier_dir is not None and count and nodes.leader and nodes.index >= nodes.count - count:
        shutil.rmtree(tier_dir, ignore_errors=True)


def read_timing(index: int, extras: list[ReadExtra]) -> StrategyTiming:
    return StrategyTiming(phase="read", index=index, tier_bytes=sum(e[0] for e in extras),
                          shared_bytes=sum(e[1] for e in extras), read_s=max(e[2] for e in extras),
                          broadcast_s=max(e[3] for e in extras), broadcast_bytes=sum(e[4] for e in extras))
