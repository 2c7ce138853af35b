"""A resharded restore on one rank of the restarted world: read exactly the byte ranges of the old checkpoint
that `studyctl.definition.checkpoint.reshard` maps to this rank, cold, with the point's I/O mode and block size.

O_DIRECT needs aligned offsets and lengths: each range is read as its aligned cover (offset rounded down,
end rounded up to io.ALIGN; at a file's end the read is short), covers that meet read as one span, in chunks of
`block`. `bytes_read` counts the bytes the map asked for, `transferred_bytes` what the reads moved (the covers),
so the two are told apart.
Buffered reads ask for the ranges exactly (what the kernel's readahead adds is the page cache's).

With restore `broadcast`, the new ranks needing identical bytes (the DP replicas of a model-parallel rank,
`reshard_split`'s colour) form a group: its lowest rank reads the shared ranges and MPI_Bcasts them chunk by
chunk; the others receive. The chunk sequence follows from the ranges alone, so a reader's I/O error still
sends every chunk; the error is raised after the collective part, for the caller to vote on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter, perf_counter_ns
from typing import Any

from studyctl.definition.checkpoint.layout import Parallelism
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.checkpoint.reshard import ByteRange, rank_reads, reshard_split
from studyctl.definition.checkpoint.restore_rules import restore_rule
from worker import io


@dataclass
class ReshardRead:
    """What one rank did in one resharded restore."""

    bytes_read: int = 0  # bytes of the map read from storage by this rank
    files_opened: int = 0
    ranges: list[ByteRange] = field(default_factory=list)  # what it read from storage, per file in order
    transferred_bytes: int = 0  # bytes its reads moved (the aligned cover under O_DIRECT)
    received_bytes: int = 0  # bytes delivered to it by broadcast
    read_s: float = 0.0  # this call's time less broadcast_s
    broadcast_s: float = 0.0  # time in MPI_Bcast (a receiver's includes waiting for its group's reader)


Kept = tuple[ByteRange, int, int]  # a range, and the part of a read's buffer [from, to) that is its bytes


def read_sequence(ranges: list[ByteRange], block: int, direct: bool) -> Iterator[tuple[int, int, list[Kept]]]:
    """(read offset, read length, what each range keeps of it) for one file's ranges, in offset order: under
    O_DIRECT the aligned covers of neighbouring ranges that meet are read as one span (a 4 KiB block shared
    by two ranges is read once); every span is read in `block` chunks."""
    spans: list[tuple[int, int, list[ByteRange]]] = []
    for r in ranges:
        start, end = (r.offset - r.offset % io.ALIGN, r.end + (-r.end % io.ALIGN)) if direct else (r.offset, r.end)
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end), [*spans[-1][2], r])
        else:
            spans.append((start, end, [r]))
    for start, end, members in spans:
        for off in range(start, end, block):
            length = min(block, end - off)
            kept = [(r, max(r.offset, off) - off, min(r.end, off + length) - off) for r in members]
            yield off, length, [k for k in kept if k[2] > k[1]]


def _by_file(ranges: list[ByteRange]) -> list[list[ByteRange]]:
    """Ranges grouped by file, each file opened once."""
    groups: dict[str, list[ByteRange]] = {}
    for r in ranges:
        groups.setdefault(r.name, []).append(r)
    return list(groups.values())


Deliver = Callable[[ByteRange, int, memoryview], None]  # (range, file offset of the bytes, the bytes)


def _read_file(path: str, ranges: list[ByteRange], buf: io.Buffer, block: int, direct: bool,
               split: io.Split, out: ReshardRead, each: Deliver | None = None) -> None:
    """Read one file's ranges into the reused buffer, chunk by chunk; `each` gets every chunk's requested bytes
    (the restore's use of them: here a broadcast, or a test's check)."""
    fd = split.open(path, os.O_RDONLY, direct=direct)
    out.files_opened += 1
    try:
        view = buf.view
        began = perf_counter_ns()
        for off, length, kept in read_sequence(ranges, block, direct):
            got = os.preadv(fd, [view[:length]], off)
            out.transferred_bytes += got
            if kept and got < kept[-1][2]:
                raise OSError(f"{path}: short read at byte {off + got} of a range ending at {kept[-1][0].end}")
            if each is not None:
                split.transferred(began)
                for r, lo, hi in kept:
                    each(r, off + lo, view[lo:hi])
                began = perf_counter_ns()
        split.transferred(began)
        out.bytes_read += sum(r.length for r in ranges)
        out.ranges += ranges
    finally:
        split.close(fd)


def _broadcast(group: Any, step_dir: Path, shared: list[ByteRange], buf: io.Buffer, block: int, direct: bool,
               split: io.Split, out: ReshardRead, deliver: Deliver | None) -> OSError | None:
    """Root reads and sends each chunk of the shared ranges; the others receive the same sequence."""
    from mpi4py import MPI

    view = buf.view
    root = group.Get_rank() == 0
    failed: OSError | None = None
    sent = 0

    def send(r: ByteRange, offset: int, data: memoryview) -> None:
        nonlocal sent
        start = perf_counter()
        group.Bcast([data, MPI.BYTE], root=0)
        out.broadcast_s += perf_counter() - start
        out.received_bytes += 0 if root else len(data)
        sent += 1
        if deliver is not None:
            deliver(r, offset, data)

    for ranges in _by_file(shared):
        before = sent
        if root and failed is None:
            try:
                _read_file(str(step_dir / ranges[0].name), ranges, buf, block, direct, split, out, send)
                continue
            except OSError as exc:
                failed = exc  # the rest of the sequence is still sent, from whatever the buffer holds
        sends = [(r, off + lo, lo, hi) for off, _, kept in read_sequence(ranges, block, direct) for r, lo, hi in kept]
        for r, offset, lo, hi in sends[sent - before:]:
            send(r, offset, view[lo:hi])
    return failed


def read_resharded(comm: Any, point: Point, old: Parallelism, new: Parallelism, step_dir: Path, buf: io.Buffer,
                   block: int, direct: bool, split: io.Split, deliver: Deliver | None = None) -> ReshardRead:
    """Collective over the restarted world `comm` (new.world_size ranks): this rank's part of one restore of the
    checkpoint in `step_dir`, written with layout `old`, onto `new`; per the point's restore mode (`full`: every
    rank reads all it needs; `broadcast`: shared bytes once per group; `rank`: what the rank would write).
    Files are read as they are (make them cold before); `deliver` gets every requested chunk, read or received.
    Raises OSError after the collective part."""
    opts = point.checkpoint
    if comm.Get_size() != new.world_size:
        raise ValueError(f"the restart layout has {new.world_size} ranks but the world {comm.Get_size()}")
    rank = comm.Get_rank()
    colour, own, shared = reshard_split(point.model, old, new, rank, opts.scale, opts.naming)
    out = ReshardRead()
    failed: OSError | None = None
    start = perf_counter()
    if restore_rule(opts.restore).broadcasts and new.zero_stage < 3:  # the same on every rank: Split is collective
        group = comm.Split(color=colour, key=rank)
        try:
            failed = _broadcast(group, step_dir, shared, buf, block, direct, split, out, deliver)
        finally:
            group.Free()
        reads = own
    else:
        reads = rank_reads(own, shared, rank < new.model_parallel, opts.restore)
    for ranges in _by_file(reads) if failed is None else []:
        _read_file(str(step_dir / ranges[0].name), ranges, buf, block, direct, split, out, deliver)
    out.read_s = perf_counter() - start - out.broadcast_s
    if failed is not None:
        raise failed
    return out
