"""Where each tensor lies inside a checkpoint file (pure): the in-file layout studyctl defines and writes.

DLIO fixes only the files and their sizes (`layout.rank_files`); what the bytes inside mean is studyctl's
definition, chosen so that loading onto another layout (what torch.distributed.checkpoint and ByteCheckpoint
do) is exact. Element counts follow DLIO's integer divisions, so every file's size is unchanged.

- A **model-state file** holds its rank's piece of every tensor of its pipeline stage, layer by layer
  (`model_tensors.stage_layers`), in each layer DLIO's tensor order (`model_tensors.layer_tensors`), each piece
  contiguous.
  A TP-split tensor is stored with its split dimension outermost (column-parallel weights as Megatron keeps
  them, row-parallel ones transposed), so TP rank t holds the contiguous block [t·q, (t+1)·q) of its elements,
  q = n // TP; the last n mod TP elements are in no file (DLIO drops them) and a restart needing them
  initialises them. A replicated tensor (norms, row-parallel biases) is whole in every TP rank's file.
  ZeRO-3 cuts each such piece again over DP the same way: rank dp holds [dp·s, (dp+1)·s), s = piece // DP.
  A ZeRO-1/2 checkpoint with PP > 1 has one file per layer, holding that layer's pieces only.
- An **optimizer file** holds 3 groups (fp32 master weights, Adam m, Adam v), each [partition][5h small].
  The partitions cut one flat vector of the model's N parameters (layer by layer, each tensor whole, split
  dimension outermost) into P equal contiguous pieces of n = N // P: P = MP under ZeRO 0 (written by DP replica
  0), MP·DP under ZeRO ≥ 1, piece mp·DP + dp (a model-parallel rank's share, cut over its DP group, as ZeRO
  partitions it). The 5h small elements per group are state every writer holds alike (a copy each).
  Under a per-tensor state convention (torch) a partition is stored as its runs of the parameter tensors it
  covers (`parameter_runs`), one tensor each, in the same order, so its bytes lie where they did; its
  per-parameter steps follow the last group (`layout.optimizer_step_bytes`), so no group's bytes move.
- With `scale` < 1 every tensor shrinks in proportion: nominal byte x of a file of nominal size X lies at
  ⌊x·S/X⌋ of the file as written (size S), so pieces keep their order and their share of the file.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from functools import lru_cache

from studyctl.definition.checkpoint.layout import (
    OPTIMIZER_GROUPS,
    OPTIMIZER_SMALL_TENSOR_FACTOR,
    CheckpointFile,
    Naming,
    Parallelism,
    num_parameters,
    rank_files,
)
from studyctl.definition.checkpoint.model_tensors import layer_tensors, stage_layers
from studyctl.definition.inputs.catalog import ModelSpec


def cuts(lo: int, hi: int, size: int, parts: int) -> Iterator[tuple[int, int, int]]:
    """(part, start, stop within the part) of [lo, hi) over `parts` consecutive blocks of `size` elements;
    what lies past parts·size (an integer division's remainder) is in no part."""
    if size <= 0 or hi <= lo:
        return
    for part in range(lo // size, min(parts, -(-hi // size))):
        base = part * size
        start, stop = max(lo, base) - base, min(hi, base + size) - base
        if stop > start:
            yield part, start, stop


def held(n: int, split: bool, tensor: int, shards: int, tp: int, shard: int) -> tuple[int, int]:
    """[lo, hi) of a tensor of n elements that the rank (tp, ZeRO-3 shard) holds: its TP block, then its cut."""
    piece = n // tensor if split else n
    base = tp * piece if split else 0
    size = piece // shards
    return base + shard * size, base + (shard + 1) * size


@lru_cache(maxsize=65536)
def stage_of(num_layers: int, pipeline: int, layer: int) -> int:
    """The pipeline stage holding a layer index."""
    return next(s for s in range(pipeline) if layer in stage_layers(num_layers, pipeline, s))


def model_shards(par: Parallelism) -> int:
    """How many ways ZeRO cuts each TP piece of the weights (DP under ZeRO-3, else none)."""
    return par.data if par.zero_stage == 3 else 1


def weight_holder(par: Parallelism, tp: int, stage: int, shard: int) -> int:
    """The rank whose files hold the weights of (tp, stage, shard): DP replica 0 unless ZeRO-3."""
    return tp + par.tensor * (stage + par.pipeline * shard)


@lru_cache(maxsize=4096)
def tensor_starts(m: ModelSpec, par: Parallelism, stage: int) -> dict[int, tuple[int, tuple[int, ...]]]:
    """layer → (model file slot, first element of each of its tensors in that file) for a stage's files.
    Slot 0 is the stage's one model file; with one file per layer (ZeRO-1/2, PP > 1) the slot counts the
    layers that have tensors and every file starts at element 0."""
    files = [f for f in rank_files(m, par, weight_holder(par, 0, stage, 0)) if f.kind == "model"]
    per_layer = len(files) > 1
    out: dict[int, tuple[int, tuple[int, ...]]] = {}
    slot = element = 0
    for layer in stage_layers(m.num_layers, par.pipeline, stage):
        tensors = layer_tensors(m, layer)
        if per_layer:
            element = 0
        starts = []
        for n, split in tensors:
            starts.append(element)
            element += (n // par.tensor if split else n) // model_shards(par)
        out[layer] = (slot, tuple(starts))
        slot += 1 if per_layer and tensors else 0
    return out


def replica_kinds(m: ModelSpec, zero_stage: int) -> tuple[str, ...]:
    """File kinds every DP replica holds alike, from the layout's own rule: what DP replica 0 writes and
    replica 1 does not (weights below ZeRO-3; with ZeRO 0 the optimizer too)."""
    probe = Parallelism(1, 1, 2, zero_stage)
    second = {f.kind for f in rank_files(m, probe, 1)}
    return tuple(dict.fromkeys(f.kind for f in rank_files(m, probe, 0) if f.kind not in second))


def optimizer_writers(par: Parallelism) -> int:
    """P: the pieces the flat optimizer vector is cut into."""
    return par.model_parallel * (par.data if par.zero_stage >= 1 else 1)


def optimizer_piece(par: Parallelism, rank: int) -> int:
    """The piece a rank holds after a restore (under ZeRO 0 every DP replica holds replica 0's)."""
    mp = rank % par.model_parallel
    return mp * par.data + rank // par.model_parallel if par.zero_stage >= 1 else mp


def optimizer_writer(par: Parallelism, piece: int) -> int:
    """The rank whose optimizer file holds a piece."""
    if par.zero_stage == 0:
        return piece
    mp, dp = divmod(piece, par.data)
    return mp + par.model_parallel * dp


def optimizer_sizes(m: ModelSpec, par: Parallelism) -> tuple[int, int]:
    """(n: partition elements per group, small elements per group); a group spans n + small elements."""
    return num_parameters(m) // optimizer_writers(par), OPTIMIZER_SMALL_TENSOR_FACTOR * m.hidden_size


@lru_cache(maxsize=256)
def _parameter_starts(m: ModelSpec) -> tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]:
    """The flat vector's parameter tensors: each one's first element, and its (layer, index in layer, n)."""
    starts, tensors, element = [], [], 0
    for layer in range(m.num_layers + 3):
        for j, (n, _) in enumerate(layer_tensors(m, layer)):
            starts.append(element)
            tensors.append((layer, j, n))
            element += n
    return tuple(starts), tuple(tensors)


def parameter_runs(m: ModelSpec, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """(layer, index in layer, elements) of each parameter tensor's run inside [lo, hi) of the flat vector of
    the model's parameters (layer by layer, each tensor whole), in order: where a partition cuts tensors."""
    starts, tensors = _parameter_starts(m)
    out = []
    for i in range(max(bisect_right(starts, lo) - 1, 0), len(starts)):
        if starts[i] >= hi:
            break
        layer, j, n = tensors[i]
        run = min(hi, starts[i] + n) - max(lo, starts[i])
        if run > 0:
            out.append((layer, j, run))
    return out


def optimizer_groups() -> range:
    return range(OPTIMIZER_GROUPS)


def scaled_offset(x: int, nominal: int, scaled: int) -> int:
    """Where nominal byte x of a file lies once its tensors are scaled (module docstring)."""
    if nominal == scaled:
        return x
    return scaled if x >= nominal else min(scaled, x * scaled // nominal)


@lru_cache(maxsize=65536)
def file_of(m: ModelSpec, par: Parallelism, rank: int, scale: float, naming: Naming, kind: str,
            slot: int) -> tuple[CheckpointFile, int]:
    """A rank's `slot`-th file of a kind as written (scaled), with its nominal size."""
    nominal = [f for f in rank_files(m, par, rank, 1.0, naming) if f.kind == kind][slot]
    return [f for f in rank_files(m, par, rank, scale, naming) if f.kind == kind][slot], nominal.nbytes
