"""What one restore onto a restart layout reads, counted over its ranks without listing each rank's byte ranges.

The figures are exactly those of summing `reshard.reshard_split` rank by rank (what each restarted rank reads),
found by arithmetic, a few integer operations per rank (`python -m benchmarks plan_restart`):
- a rank's bytes of one file are the sum of its pieces' lengths as written (pieces never overlap, so merging
  adjacent ones changes no sum), and it opens the files of which it reads at least one byte;
- its optimizer piece spans consecutive old pieces: whole ones in the middle (the same bytes each), partial ones
  at both ends, and the small state of the first, so each piece costs a few integer operations;
- below ZeRO-3 its weights are those of its model-parallel rank (`reshard.weight_ranges`, once per class);
  under ZeRO-3 they are its own, and the transformer layers repeat in every file at a fixed stride, so a piece's
  bytes over all of them is one floor sum (a scaled file puts nominal byte x at ⌊x·S/X⌋).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import lru_cache

from studyctl.definition.checkpoint.layout import OPTIMIZER_GROUPS, Naming, Parallelism
from studyctl.definition.checkpoint.model_tensors import layer_tensors
from studyctl.definition.checkpoint.reshard import check_restart, weight_ranges
from studyctl.definition.checkpoint.restore_rules import restore_rule
from studyctl.definition.checkpoint.tensor_layout import (
    file_of,
    model_shards,
    optimizer_piece,
    optimizer_sizes,
    optimizer_writer,
    optimizer_writers,
    replica_kinds,
    tensor_starts,
)
from studyctl.definition.inputs.catalog import ModelSpec

Reads = tuple[int, int]  # (files opened, bytes read) of one kind of file


@dataclass(frozen=True)
class ReshardSummary:
    """One restore onto a restart layout, over its ranks: what storage serves, and what broadcast delivers."""

    ranks: int
    files_opened_max: int
    files_opened_mean: float
    bytes_per_rank_max: int
    bytes_per_rank_mean: float
    total_bytes: int  # read from storage by all ranks together
    broadcast_bytes: int = 0  # delivered by MPI_Bcast to the ranks that did not read them (restore broadcast)


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i<n} ⌊(a·i + b) / m⌋ for a, b ≥ 0 and m ≥ 1, in O(log m) steps (the Euclid-like reduction)."""
    total = 0
    while True:
        if a >= m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        top = a * n + b
        if top < m:
            return total
        n, b = divmod(top, m)
        m, a = a, m


@dataclass(frozen=True)
class _Scaled:
    """Byte offsets of a file kind as written: nominal x at ⌊x·S/X⌋ (every old file of the kind has one size)."""

    per: int  # bytes per element
    nominal: int
    scaled: int

    def at(self, element: int) -> int:
        x = element * self.per
        return x if self.nominal == self.scaled else min(self.scaled, x * self.scaled // self.nominal)

    def repeated(self, element: int, reps: int, stride: int) -> int:
        """Σ_{i<reps} at(element + i·stride), every offset inside the file."""
        if self.nominal == self.scaled:
            return (reps * element + stride * reps * (reps - 1) // 2) * self.per
        mul = self.per * self.scaled
        return floor_sum(reps, self.nominal, stride * mul, element * mul)


def _scaled_kind(m: ModelSpec, old: Parallelism, rank: int, kind: str, scale: float, naming: Naming) -> _Scaled:
    f, nominal = file_of(m, old, rank, scale, naming, kind, 0)
    per = m.optimizer_bytes_per_param if kind == "optimizer" else m.model_bytes_per_param
    return _Scaled(per, nominal, f.nbytes)


def optimizer_reads(m: ModelSpec, old: Parallelism, new: Parallelism, scale: float, naming: Naming
                    ) -> tuple[list[int], list[int]]:
    """Per optimizer piece of the new layout: the old optimizer files its rank opens, and their bytes it reads.

    A piece spans old pieces from its start to its end (whole ones between), and reads the small state from the
    first. Q(x), the scaled offsets of element x summed over the groups, is found once per piece boundary: the
    bytes of elements [a, b) of an old piece are Q(b) − Q(a), of a whole one Q(n) − Q(0)."""
    n_new, _ = optimizer_sizes(m, new)
    n_old, small = optimizer_sizes(m, old)
    writers, span = optimizer_writers(old), n_old + small
    f = _scaled_kind(m, old, optimizer_writer(old, 0), "optimizer", scale, naming)
    starts = [g * span for g in range(OPTIMIZER_GROUPS)]

    def q(x: int) -> int:
        return sum(f.at(g + x) for g in starts)

    q_start, q_end = q(0), q(n_old)
    small_bytes, whole = q(n_old + small) - q_end, q_end - q_start
    limit = writers * n_old  # past it: elements in no old piece
    pieces = optimizer_writers(new)
    at = [q(min(p * n_new, limit) % n_old) for p in range(pieces + 1)] if n_old else []  # Q at each boundary
    files: list[int] = []
    nbytes: list[int] = []
    for piece in range(pieces):
        lo = piece * n_new
        if lo >= limit or n_new == 0:  # no old piece holds it: the small state of the last (or its first) only
            files.append(1 if small_bytes else 0)
            nbytes.append(small_bytes)
            continue
        first = lo // n_old
        last = min(lo + n_new, limit) // n_old
        if first == last:
            head, middle, tail = at[piece + 1] - at[piece], 0, 0
        else:
            head, middle, tail = q_end - at[piece], last - first - 1, at[piece + 1] - q_start
        head += small_bytes
        files.append((1 if head else 0) + (middle if whole else 0) + (1 if tail else 0))
        nbytes.append(head + middle * whole + tail)
    return files, nbytes


def _runs(m: ModelSpec, old: Parallelism) -> list[tuple[list[tuple[int, bool]], tuple[int, ...], int, int]]:
    """The old (ZeRO-3, one stage) file's layers as runs of equal layers at a fixed stride:
    (tensors, first element of each in the run's first layer, layers, stride in elements)."""
    starts = tensor_starts(m, old, 0)
    runs: list[tuple[list[tuple[int, bool]], tuple[int, ...], int, int]] = []
    for layer in sorted(starts):
        tensors, first = layer_tensors(m, layer), starts[layer][1]
        if not tensors:
            continue
        if runs and runs[-1][0] == tensors:
            _, at, reps, stride = runs[-1]
            step = first[0] - at[0] if reps == 1 else stride
            if all(x - y == reps * step for x, y in zip(first, at, strict=True)):
                runs[-1] = (tensors, at, reps + 1, step)
                continue
        runs.append((tensors, first, 1, 0))
    return runs


class _Offsets(dict[int, int]):
    """B(x): the scaled offsets of `start + x` summed over a run's layers, each computed once."""

    def __init__(self, f: _Scaled, start: int, reps: int, stride: int) -> None:
        super().__init__()
        self.f, self.start, self.reps, self.stride = f, start, reps, stride

    def __missing__(self, x: int) -> int:
        self[x] = value = self.f.repeated(self.start + x, self.reps, self.stride)
        return value


_ShardTensor = tuple[bool, int, int, int, int, int, _Offsets, int]


def _shard_tensors(m: ModelSpec, old: Parallelism, new: Parallelism, f: _Scaled) -> list[_ShardTensor]:
    """Per tensor of the old file's runs: (split by TP, its new TP piece, a new shard's elements of it, its old TP
    piece, an old shard's elements, the elements in old shards, B of the run, a whole old shard's bytes)."""
    old_shards, new_shards = model_shards(old), model_shards(new)
    tensors = []
    for layers, starts, reps, stride in _runs(m, old):
        for (n, split), start in zip(layers, starts, strict=True):
            piece = n // old.tensor if split else n
            size = piece // old_shards
            if size > 0:
                sums = _Offsets(f, start, reps, stride)
                new_piece = n // new.tensor if split else n
                tensors.append((split, new_piece, new_piece // new_shards, piece, size, old_shards * size, sums,
                                sums[size] - sums[0]))
    return tensors


def sharded_weight_reads(m: ModelSpec, old: Parallelism, new: Parallelism, scale: float,
                         naming: Naming) -> tuple[list[int], list[int]]:
    """ZeRO-3 (one pipeline stage both sides): per new rank, the old model files it opens, and their bytes.

    A tensor's old shards each hold `size` elements of it at `start` of their file (in every layer of a run), so
    the bytes of its elements [c, d) in one shard are B(d) − B(c), and a whole shard's are the same for every
    shard: per rank and tensor a few sums (`tensor_layout.held`, `cuts` and `weight_holder`, inlined: one stage,
    old rank tp + TP·shard)."""
    old_tp_count = old.tensor
    tensors = _shard_tensors(m, old, new, _scaled_kind(m, old, 0, "model", scale, naming))
    # TP kept: every TP rank of a shard reads its own TP rank's files alike (all old files have one layout), so
    # TP rank 0's figures stand for every TP rank of its shard
    same_tp = new.tensor == old_tp_count
    files: list[int] = []
    nbytes: list[int] = []
    for rank in range(0, new.world_size, new.tensor if same_tp else 1):
        tp, shard = rank % new.tensor, rank // new.tensor
        opened: set[int] = set()
        moved = 0
        for split, new_piece, new_size, piece, size, limit, sums, whole in tensors:
            lo = (tp * new_piece if split else 0) + shard * new_size
            hi = lo + new_size
            if same_tp:  # the rank's block is the old rank's of its TP rank
                blocks = [(tp, shard * new_size, shard * new_size + new_size)]
            elif split:
                blocks = [(t, max(lo, t * piece) - t * piece, min(hi, t * piece + piece) - t * piece)
                          for t in range(lo // piece, min(old_tp_count, -(-hi // piece)))]
            else:
                blocks = [(tp % old_tp_count, lo, hi)]
            for old_tp, a, b in blocks:
                b = min(b, limit)  # past the last shard: a remainder in no file
                if b <= a:
                    continue
                first, c = divmod(a, size)
                last, d = divmod(b, size)
                if first == last:
                    head, tail = sums[d] - sums[c], 0
                else:
                    head, tail = sums[size] - sums[c], sums[d] - sums[0]
                    if whole:
                        opened.update(range(old_tp + old_tp_count * (first + 1), old_tp + old_tp_count * last,
                                            old_tp_count))
                    moved += (last - first - 1) * whole
                if head:
                    opened.add(old_tp + old_tp_count * first)
                if tail:
                    opened.add(old_tp + old_tp_count * last)
                moved += head + tail
        files.append(len(opened))
        nbytes.append(moved)
    if same_tp:
        return [v for v in files for _ in range(new.tensor)], [v for v in nbytes for _ in range(new.tensor)]
    return files, nbytes


@lru_cache(maxsize=256)
def _class_weights(m: ModelSpec, old: Parallelism, new: Parallelism, tp: int, pp: int, scale: float,
                   naming: Naming) -> Reads:
    ranges = weight_ranges(m, old, new, tp, pp, 0, scale, naming)
    return len({r.name for r in ranges}), sum(r.length for r in ranges)


def weight_reads(m: ModelSpec, old: Parallelism, new: Parallelism, scale: float, naming: Naming
                 ) -> tuple[list[int], list[int]]:
    """Per new rank, in rank order: the old model files it opens, and their bytes it reads."""
    if new.zero_stage == 3:
        return sharded_weight_reads(m, old, new, scale, naming)
    per_class = [_class_weights(m, old, new, *new.coords(mp)[:2], scale, naming) for mp in range(new.model_parallel)]
    return [f for f, _ in per_class] * new.data, [b for _, b in per_class] * new.data


def reshard_summary(model: ModelSpec, old: Parallelism, new: Parallelism, scale: float = 1.0,
                    naming: Naming = "dlio", restore: str = "full") -> ReshardSummary:
    """Files opened and bytes read per rank (max, mean) and in total for one restore onto `new`, as the restore
    mode's rule says: every rank reads the replicated kinds (`full`), or only its group's reader (`broadcast`,
    which sends them on, and `rank`, DLIO's). Per-rank lists in rank order, added with builtins: no Python step per
    rank here."""
    check_restart(model, old, new)
    rule = restore_rule(restore)
    shared = replica_kinds(model, new.zero_stage)
    by_piece = optimizer_reads(model, old, new, scale, naming)
    order = [optimizer_piece(new, rank) for rank in range(new.model_parallel)]  # the pieces of DP replica 0
    # a rank's piece moves by one step from a DP replica to the next (1 under ZeRO >= 1, 0 under ZeRO 0)
    step = optimizer_piece(new, new.model_parallel) - order[0] if new.data > 1 else 0
    kinds = {"model": weight_reads(model, old, new, scale, naming),
             "optimizer": tuple([values[p + dp * step] for dp in range(new.data) for p in order]
                                for values in by_piece)}
    mp, ranks = new.model_parallel, new.world_size
    files, nbytes = [0] * ranks, [0] * ranks
    sent = 0
    for kind, (opened, moved) in kinds.items():
        if rule.every_rank_reads_shared or kind not in shared:
            files = list(map(operator.add, files, opened))
            nbytes = list(map(operator.add, nbytes, moved))
            continue
        files[:mp] = map(operator.add, files[:mp], opened[:mp])  # each group's reader, DP replica 0
        nbytes[:mp] = map(operator.add, nbytes[:mp], moved[:mp])
        sent += sum(moved[mp:]) if rule.broadcasts else 0
    total = sum(nbytes)
    return ReshardSummary(ranks, max(files), sum(files) / ranks, max(nbytes), total / ranks, total, sent)
