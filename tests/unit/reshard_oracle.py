"""The reshard map computed a second, independent way, for tests: element by element on a tiny model.

Every element of the checkpoint gets an identity (weight (layer, tensor, index); optimizer (group, flat index);
small state (group, index)) and an owner in each layout, by per-element division (the layout rules written
out again, not `tensor_layout`'s interval cuts). Each old file is enumerated element by element in writing
order, so a position is where an element was written; a new rank's needs are the elements its layout gives
it, located in the old files, turned into bytes. Only DLIO's file names and stage rule come from the code.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

from studyctl.definition.checkpoint.layout import Parallelism, num_parameters, rank_files
from studyctl.definition.checkpoint.model_tensors import layer_tensors, stage_layers
from studyctl.definition.inputs.catalog import ModelSpec

Bytes = dict[str, set[int]]  # file name → byte offsets


def _owner(e: int, n: int, split: bool, tensor: int, shards: int) -> tuple[int | None, int | None]:
    """(tp, ZeRO-3 shard) holding element e of a tensor of n elements; None where a remainder drops it."""
    tp = None
    if split:
        piece = n // tensor
        tp = e // piece if piece and e < tensor * piece else None
        if tp is None:
            return None, None
        e -= tp * piece
    else:
        piece = n
    size = piece // shards
    shard = e // size if size and e < shards * size else None
    return tp, shard


def _shards(par: Parallelism) -> int:
    return par.data if par.zero_stage == 3 else 1


def _held(m: ModelSpec, par: Parallelism, layer: int, tp: int, shard: int) -> list[tuple]:
    """The weight elements a rank (tp, shard) holds of one layer, in writing order."""
    out = []
    for j, (n, split) in enumerate(layer_tensors(m, layer)):
        for e in range(n):
            owner = _owner(e, n, split, par.tensor, _shards(par))
            if owner[1] == shard and (not split or owner[0] == tp):
                out.append(("w", layer, j, e))
    return out


def _writers(par: Parallelism) -> int:
    return par.model_parallel * (par.data if par.zero_stage else 1)


def _piece_of(par: Parallelism, rank: int) -> int:
    mp, dp = rank % par.model_parallel, rank // par.model_parallel
    return mp * par.data + dp if par.zero_stage else mp


def file_contents(m: ModelSpec, par: Parallelism) -> dict[str, list[tuple]]:
    """Every file of the layout: the element written at each position (small state tagged with its file)."""
    out: dict[str, list[tuple]] = {}
    n_opt = num_parameters(m) // _writers(par)
    for rank in range(par.world_size):
        tp, pp, dp = par.coords(rank)
        shard = dp if par.zero_stage == 3 else 0
        for f in rank_files(m, par, rank):
            if f.kind == "optimizer":
                w = _piece_of(par, rank)
                out[f.name] = [x for g in range(3) for x in
                               [("o", g, w * n_opt + i) for i in range(n_opt)]
                               + [("s", g, i, f.name) for i in range(5 * m.hidden_size)]]
                continue
            layer = re.match(r"layer_(\d+)-", f.name)
            layers = [int(layer.group(1))] if layer else stage_layers(m.num_layers, par.pipeline, pp)
            out[f.name] = [x for i in layers for x in _held(m, par, i, tp, shard)]
    return out


@lru_cache(maxsize=8)
def _where(m: ModelSpec, par: Parallelism) -> dict[tuple, list[tuple[str, int]]]:
    """Every element → the (file, position) of each copy written."""
    where: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
    for name, elements in file_contents(m, par).items():
        for pos, x in enumerate(elements):
            where[x].append((name, pos))
    return where


def needs(m: ModelSpec, old: Parallelism, new: Parallelism, rank: int, scale: float = 1.0) -> Bytes:
    """Bytes of old files the new rank needs, found element by element; with `scale` < 1 each element's bytes
    [x, y) of a file of nominal size X lie at [⌊x·S/X⌋, ⌊y·S/X⌋) of the file as written (size S)."""
    sizes = {f.name: (nominal.nbytes, f.nbytes) for r in range(old.world_size)
             for f, nominal in zip(rank_files(m, old, r, scale), rank_files(m, old, r), strict=True)}
    where = _where(m, old)
    tp, pp, dp = new.coords(rank)
    wanted: list[tuple[tuple, int | None]] = []  # (element, the old TP copy for replicated weights)
    for layer in stage_layers(m.num_layers, new.pipeline, pp):
        split = {j: s for j, (_, s) in enumerate(layer_tensors(m, layer))}
        wanted += [(x, None if split[x[2]] else tp % old.tensor)
                   for x in _held(m, new, layer, tp, dp if new.zero_stage == 3 else 0)]
    n_new, n_old = num_parameters(m) // _writers(new), num_parameters(m) // _writers(old)
    first = _piece_of(new, rank) * n_new
    wanted += [(("o", g, i), None) for g in range(3) for i in range(first, first + n_new)]
    small_file = _optimizer_name(m, old, min(first // n_old, _writers(old) - 1))
    wanted += [(("s", g, i, small_file), None) for g in range(3) for i in range(5 * m.hidden_size)]
    out: Bytes = defaultdict(set)
    for x, copy in wanted:
        places = where.get(x, [])
        if copy is not None:
            places = [p for p in places if _tp_of_file(m, old, p[0]) == copy]
        for name, pos in places[:1]:
            size = m.optimizer_bytes_per_param if x[0] in "os" else m.model_bytes_per_param
            nominal, written = sizes[name]
            out[name].update(range(pos * size * written // nominal, (pos + 1) * size * written // nominal))
    return {name: b for name, b in out.items() if b}


def _optimizer_name(m: ModelSpec, par: Parallelism, piece: int) -> str:
    rank = next(r for r in range(par.world_size) if rank_files(m, par, r) and _piece_of(par, r) == piece
                and any(f.kind == "optimizer" for f in rank_files(m, par, r)))
    return next(f.name for f in rank_files(m, par, rank) if f.kind == "optimizer")


def _tp_of_file(m: ModelSpec, par: Parallelism, name: str) -> int:
    return next(par.coords(r)[0] for r in range(par.world_size) if any(f.name == name for f in rank_files(m, par, r)))


def as_bytes(ranges: list) -> Bytes:
    out: Bytes = defaultdict(set)
    for r in ranges:
        out[r.name].update(range(r.offset, r.offset + r.length))
    return dict(out)
