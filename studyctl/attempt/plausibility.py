"""Cross-field checks of a schema-valid result: figures that cannot be true make the file unusable.

The schema (definition/result_schema.py) already refuses NaN, infinite and negative figures; what is left is
a file whose fields disagree with each other or with the point's layout (hand-edited, damaged, or
written by a studyctl with other layout rules), and rates no storage reaches (1e308 GiB/s crashed the
plots). The first problem found is returned as one line.
"""

from __future__ import annotations

import math

from studyctl.definition.result_schema import CheckpointTiming, Result
from studyctl.units import GIB

# 1 PiB/s: far above any storage system (or memory-backed filesystem) a checkpoint study can reach.
MAX_GIBPS = 1024.0 * 1024.0
REL_TOL = 1e-3  # rounding in the worker's own arithmetic is far below this


def _checkpoint_problem(c: CheckpointTiming, expected_bytes: int) -> str | None:
    what = f"{c.phase} {c.index}"
    if c.bytes != expected_bytes:
        return f"{what} moved {c.bytes} bytes, the result's sizes say {expected_bytes}"
    if sum(r.bytes for r in c.ranks) != c.bytes:
        return f"{what}: its ranks' bytes add up to {sum(r.bytes for r in c.ranks)}, not {c.bytes}"
    if c.bytes and (c.span_s <= 0 or c.duration_max_s <= 0):
        return f"{what}: {c.bytes} bytes in {min(c.span_s, c.duration_max_s)} s"
    for r in c.ranks:
        if r.bytes and r.duration_s <= 0:
            return f"{what}: rank {r.rank} moved {r.bytes} bytes in {r.duration_s} s"
    rates = {"aggregate_GiBps": c.aggregate_GiBps, "rank_bandwidth_max_GiBps": c.rank_bandwidth_max_GiBps}
    for name, value in rates.items():
        if value > MAX_GIBPS:
            return f"{what}: {name} = {value:g} GiB/s, above {MAX_GIBPS:g} (1 PiB/s)"
    if c.bytes and not math.isclose(c.aggregate_GiBps, c.bytes / GIB / c.span_s, rel_tol=REL_TOL):
        return f"{what}: aggregate_GiBps = {c.aggregate_GiBps:g}, but bytes / span_s = {c.bytes / GIB / c.span_s:g}"
    return None


def implausible(r: Result) -> str | None:
    """One line naming the first figure that cannot be true, or None."""
    p, sizes = r.point, r.sizes
    if not p.problems():
        for field, layout in (("written_checkpoint_bytes", p.layout()), ("nominal_checkpoint_bytes",
                                                                        p.nominal_layout())):
            if getattr(sizes, field) != layout.total_bytes:
                return (f"sizes.{field} = {getattr(sizes, field)}, but the point's layout has "
                        f"{layout.total_bytes} bytes")
    expected = {"write": sizes.written_checkpoint_bytes, "read": sizes.read_bytes_per_restore}
    if r.ceilings is not None:  # a ceiling point's checkpoints are its probe: one largest shard per rank
        expected = dict.fromkeys(expected, r.ceilings.largest_shard_bytes * r.provenance.world_size)
    for c in r.checkpoints:
        problem = _checkpoint_problem(c, expected[c.phase])
        if problem:
            return problem
    return None
