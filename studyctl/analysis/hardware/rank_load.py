"""Per-rank facts a named limit rests on: where each rank's time went, what makes the heaviest rank heavy
(from the layout rules, `definition.checkpoint.layout`, never guessed), and a ceiling result as a plain row."""

from __future__ import annotations

from collections import Counter
from typing import Any

from studyctl.definition.checkpoint.layout import rank_files, write_classes
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.result.result_schema import RankTiming, Result

SPLIT_FIELDS = ("open_s", "transfer_s", "fsync_s", "close_s", "other_s")
NAN = float("nan")


def rank_split(rk: RankTiming) -> tuple[float, ...]:
    """The rank's split in SPLIT_FIELDS order; NaN where the worker recorded none (older results)."""
    if rk.split is None:
        return (NAN,) * len(SPLIT_FIELDS)
    return tuple(float(getattr(rk.split, f)) for f in SPLIT_FIELDS)


def _kinds(point: Point, rank: int) -> Counter[str]:
    files = rank_files(point.model, point.parallelism, rank, point.checkpoint.scale,
                       conv=point.checkpoint.convention)
    out: Counter[str] = Counter()
    for f in files:
        out[f.kind] += f.nbytes
    return out


def _where(point: Point, heavy: int, typical: int) -> str:
    """How the heaviest rank's position differs from the typical rank's: "data-parallel rank 0", a stage."""
    par = point.parallelism
    _, pp_h, dp_h = par.coords(heavy)
    _, pp_t, dp_t = par.coords(typical)
    parts = []
    if dp_h != dp_t:
        parts.append(f"data-parallel rank {dp_h}")
    if pp_h != pp_t:
        parts.append(f"pipeline stage {pp_h}")
    return ", ".join(parts) or f"rank {heavy}"


def heaviest_rank(point: Point) -> dict[str, str | None]:
    """{"heavy_rank_files": "ZeRO-1 model states on data-parallel rank 0"}: which kind of file makes the heaviest
    rank heavier than the most common one (None when every writing rank writes the same bytes)."""
    if point.problems():
        return {"heavy_rank_files": None}
    opts = point.checkpoint
    classes = write_classes(point.model, point.parallelism, opts.scale, opts.convention)
    loads = {rank: _kinds(point, rank) for rank, _ in classes}
    heavy = max(loads, key=lambda r: (sum(loads[r].values()), -r))
    typical = max(classes, key=lambda c: (c[1], -sum(loads[c[0]].values())))[0]
    extra = {k: n - loads[typical].get(k, 0) for k, n in loads[heavy].items() if n > loads[typical].get(k, 0)}
    if heavy == typical or not extra:
        return {"heavy_rank_files": None}
    kinds = " and ".join(sorted(extra, key=lambda k: -extra[k]))
    return {"heavy_rank_files": f"ZeRO-{point.zero_stage} {kinds} states on {_where(point, heavy, typical)}"}


def ceiling_row(r: Result) -> dict[str, Any] | None:
    """A ceiling point's measured ceilings, with its shape's settings and how its probe read and wrote (a row of the
    `ceilings` table; `rounds` as recorded, else from its checkpoints); None for a ceiling point's result that
    carries none (nothing to join)."""
    if r.ceilings is None:
        return None
    shape = shape_of(r.point)
    return {"shape": shape.key, "point_id": r.point_id, "study": r.study, "nodes": shape.nodes,
            "ranks_per_node": shape.ranks_per_node, "filesystem": shape.filesystem, "io_mode": shape.io_mode,
            "block_mib": shape.block_mib, "simulated_nodes": r.provenance.simulated_nodes,
            "repetition": r.point.repetition, "cold_read_method": r.io.cold_read_method,
            "io_mode_used": r.io.io_mode_used, "streamed_bytes_per_rank": _streamed(r),
            **r.ceilings.model_dump(exclude={"shape"}),
            "rounds": r.ceilings.rounds or probe_rounds(r)}


def _streamed(r: Result) -> int | None:
    """The bytes each rank's probe file took (the probe streams as far as its bound: not always the whole shard)."""
    writes = [c.bytes for c in r.checkpoints if c.phase == "write"]
    return max(writes) // r.point.world_size if writes else None


def probe_rounds(r: Result) -> dict[str, list[float]]:
    """A ceiling result without recorded rounds: its checkpoints are the largest-shard probe's write and read, one
    per round (`worker.ceiling`), so they are those two rates' rounds; the others have none."""
    return {f"storage_{phase}_GiBps": rates for phase in ("write", "read")
            if (rates := [c.aggregate_GiBps for c in r.checkpoints if c.phase == phase])}
