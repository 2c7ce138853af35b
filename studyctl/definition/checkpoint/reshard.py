"""The reshard map (pure): which byte ranges of which files of an old checkpoint each rank of a job restarted
with another layout reads, as torch.distributed.checkpoint and ByteCheckpoint load onto a new layout.

The bytes inside each file are laid out as `tensor_layout` defines. A new TP degree re-splits every TP-split
tensor along its split dimension (a new rank's block spans one or more old blocks); a new PP degree moves
whole layers between stages; ZeRO-3 cuts are re-cut by the new DP; a new DP or model-parallel degree
re-partitions the flat optimizer vector (a new piece spans one or more old pieces, in every group).
Replicated bytes (norms on every TP rank, the optimizer's small state) are read from one copy: the old TP
rank new_tp mod old TP, and the optimizer file the rank already reads. The ZeRO stage is kept.

What a new rank holds after the restore is what restore `full` gives it in the new layout: its weights
(every DP replica under ZeRO 0-2) and its optimizer piece (under ZeRO 0 DP replica 0's). `reshard_split`
separates the bytes DP replicas share (`tensor_layout.replica_kinds`), which restore `broadcast` reads once per
group and broadcasts, from each rank's own; restore `rank` (DLIO's) reads what the rank would write in the new
layout. `rank_shift` has no meaning here: the map says who reads what.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from studyctl.definition.checkpoint.layout import Naming, Parallelism, layout_problems
from studyctl.definition.checkpoint.model_tensors import layer_tensors, stage_layers
from studyctl.definition.checkpoint.restore_rules import restore_rule
from studyctl.definition.checkpoint.tensor_layout import (
    cuts,
    file_of,
    held,
    model_shards,
    optimizer_groups,
    optimizer_piece,
    optimizer_sizes,
    optimizer_writer,
    optimizer_writers,
    replica_kinds,
    scaled_offset,
    stage_of,
    tensor_starts,
    weight_holder,
)
from studyctl.definition.inputs.catalog import ModelSpec

KINDS = ("model", "optimizer")


class ReshardError(ValueError):
    """A restart the old checkpoint cannot be loaded onto; the message is the reason."""


@dataclass(frozen=True)
class ByteRange:
    """`length` bytes at `offset` of an old checkpoint file (DLIO's name, in the step directory)."""

    name: str
    kind: str  # "model" | "optimizer"
    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


# (old rank, kind, file slot among the rank's files of that kind, first element, elements)
Piece = tuple[int, str, int, int, int]


def restart_parallelism(old: Parallelism, world_size: int, tensor: int | None = None,
                        pipeline: int | None = None, model: ModelSpec | None = None) -> Parallelism:
    """The layout a job restarts with: `world_size` ranks, TP and PP kept unless given, DP what remains, the
    ZeRO stage kept. Raises ReshardError with the reason when impossible (with `model`, its dimensions too)."""
    tp = old.tensor if tensor is None else tensor
    pp = old.pipeline if pipeline is None else pipeline
    if old.running:
        raise ReshardError(f"the checkpoint was written in subset mode ({old.running} of {old.world_size} ranks): "
                           "it holds only part of the run's state")
    if world_size < 1 or tp < 1 or pp < 1:
        raise ReshardError(f"a restart needs world size, tensor and pipeline parallel >= 1 "
                           f"(got {world_size}, {tp}, {pp})")
    if world_size % (tp * pp):
        raise ReshardError(f"world size {world_size} is not a multiple of tensor_parallel×pipeline_parallel "
                           f"= {tp}×{pp} = {tp * pp}")
    new = Parallelism(tp, pp, world_size // (tp * pp), old.zero_stage)
    if model is not None:
        check_restart(model, old, new)
    return new


def check_restart(model: ModelSpec, old: Parallelism, new: Parallelism) -> None:
    """Raise ReshardError naming the first reason `old` cannot be loaded onto `new`."""
    if old.running or new.running:
        raise ReshardError("a subset-mode (MLPerf node-local) checkpoint holds only part of the run's state")
    if old.zero_stage != new.zero_stage:
        raise ReshardError(f"the ZeRO stage is kept on restart (old {old.zero_stage}, new {new.zero_stage})")
    for label, par in (("old", old), ("restart", new)):
        problems = layout_problems(model, par.world_size, par.tensor, par.pipeline, par.zero_stage)
        if problems:
            raise ReshardError(f"{label} layout TP {par.tensor} × PP {par.pipeline} × DP {par.data}: {problems[0]}")


def _model_pieces(m: ModelSpec, old: Parallelism, new: Parallelism, tp_new: int, pp_new: int,
                  shard_new: int) -> list[Piece]:
    """The pieces of old model files holding the weights a new rank (tp, stage, ZeRO-3 shard) holds."""
    old_shards = model_shards(old)
    out: list[Piece] = []
    for layer in stage_layers(m.num_layers, new.pipeline, pp_new):
        stage = stage_of(m.num_layers, old.pipeline, layer)
        slot, starts = tensor_starts(m, old, stage)[layer]
        for j, (n, split) in enumerate(layer_tensors(m, layer)):
            lo, hi = held(n, split, new.tensor, model_shards(new), tp_new, shard_new)
            if split:
                blocks = list(cuts(lo, hi, n // old.tensor, old.tensor))
            else:  # replicated over TP: one copy
                blocks = [(tp_new % old.tensor, lo, min(hi, n))]
            for tp, a, b in blocks:
                piece = n // old.tensor if split else n
                for shard, c, d in cuts(a, b, piece // old_shards, old_shards):
                    rank = weight_holder(old, tp, stage, shard)
                    out.append((rank, "model", slot, starts[j] + c, d - c))
    return out


def _optimizer_pieces(m: ModelSpec, old: Parallelism, new: Parallelism, new_rank: int) -> list[Piece]:
    """The pieces of old optimizer files holding `new_rank`'s optimizer piece, in every group, and its small
    state from the first of those files."""
    n_new, _ = optimizer_sizes(m, new)
    n_old, small = optimizer_sizes(m, old)
    lo = optimizer_piece(new, new_rank) * n_new
    span = n_old + small
    parts = list(cuts(lo, lo + n_new, n_old, optimizer_writers(old)))
    first = parts[0][0] if parts else min(lo // max(n_old, 1), optimizer_writers(old) - 1)
    out: list[Piece] = []
    for g in optimizer_groups():
        out += [(optimizer_writer(old, w), "optimizer", 0, g * span + a, b - a) for w, a, b in parts]
        out.append((optimizer_writer(old, first), "optimizer", 0, g * span + n_old, small))
    return out


def _to_ranges(m: ModelSpec, old: Parallelism, pieces: list[Piece], scale: float, naming: Naming) -> list[ByteRange]:
    """Element pieces → byte ranges of the files as written (scaled), ordered by file, adjacent ones merged."""
    size = {"model": m.model_bytes_per_param, "optimizer": m.optimizer_bytes_per_param}
    out: list[ByteRange] = []
    for rank, kind, slot, element, count in sorted(pieces, key=lambda p: (p[0], KINDS.index(p[1]), p[2], p[3])):
        if count <= 0:
            continue
        f, nominal = file_of(m, old, rank, scale, naming, kind, slot)
        start = scaled_offset(element * size[kind], nominal, f.nbytes)
        end = scaled_offset((element + count) * size[kind], nominal, f.nbytes)
        if end <= start:
            continue
        last = out[-1] if out else None
        if last is not None and last.name == f.name and last.end >= start:
            out[-1] = ByteRange(f.name, kind, last.offset, max(last.end, end) - last.offset)
        else:
            out.append(ByteRange(f.name, kind, start, end - start))
    return out


def reshard_split(model: ModelSpec, old: Parallelism, new: Parallelism, new_rank: int, scale: float = 1.0,
                  naming: Naming = "dlio") -> tuple[int, list[ByteRange], list[ByteRange]]:
    """(group colour, ranges only this rank needs, ranges every DP replica of its group needs alike)."""
    check_restart(model, old, new)
    if not 0 <= new_rank < new.world_size:
        raise ReshardError(f"rank {new_rank} is outside the restart's {new.world_size} ranks")
    tp, pp, dp = new.coords(new_rank)
    ranges = {"model": list(weight_ranges(model, old, new, tp, pp, dp if new.zero_stage == 3 else 0, scale, naming)),
              "optimizer": _to_ranges(model, old, _optimizer_pieces(model, old, new, new_rank), scale, naming)}
    shared_kinds = replica_kinds(model, new.zero_stage)
    own = [r for kind in KINDS if kind not in shared_kinds for r in ranges[kind]]
    shared = [r for kind in KINDS if kind in shared_kinds for r in ranges[kind]]
    return new_rank % new.model_parallel, own, shared


@lru_cache(maxsize=4096)
def weight_ranges(m: ModelSpec, old: Parallelism, new: Parallelism, tp: int, pp: int, shard: int, scale: float,
                  naming: Naming) -> tuple[ByteRange, ...]:
    """A new rank's weight ranges: the same for every DP replica of a model-parallel rank below ZeRO-3."""
    return tuple(_to_ranges(m, old, _model_pieces(m, old, new, tp, pp, shard), scale, naming))


def reshard_reads(model: ModelSpec, old: Parallelism, new: Parallelism, new_rank: int, scale: float = 1.0,
                  naming: Naming = "dlio") -> list[ByteRange]:
    """Exactly the bytes of old files `new_rank` needs (its weights and its optimizer piece), ranges merged."""
    _, own, shared = reshard_split(model, old, new, new_rank, scale, naming)
    return own + shared  # never the same file: a file holds one kind


def rank_reads(own: list[ByteRange], shared: list[ByteRange], root: bool, restore: str) -> list[ByteRange]:
    """What one rank reads from storage (its mode's `RestoreRule.reads_shared`): its own bytes, and the shared ones
    where every rank reads them (`full`) or it is its group's reader (`root`: `broadcast`, and `rank`, DLIO's: what
    the rank would write in the new layout)."""
    return own + shared if restore_rule(restore).reads_shared(root) else own
