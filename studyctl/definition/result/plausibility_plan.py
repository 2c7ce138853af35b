"""What a point's layout and plan fix (or bound) in its result, and the relations between a result's own fields.

Each problem is one line that starts with the field's path in the result (`sizes.read_bytes_per_restore`,
`checkpoints.3.ranks.0.requests.put`, `recovery.new_world_size`). Rules that need the layout run only for a
point whose layout can exist (one that cannot is itself the problem).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from studyctl.definition.checkpoint.configuration import ByConfiguration
from studyctl.definition.checkpoint.engines import engine_framing_bytes
from studyctl.definition.checkpoint.layout import LayoutSummary, Naming, Parallelism
from studyctl.definition.checkpoint.points import Point, restore_bytes
from studyctl.definition.checkpoint.recovery import restart_layout
from studyctl.definition.checkpoint.reshard_counts import ReshardSummary, reshard_summary
from studyctl.definition.inputs.catalog import ModelSpec
from studyctl.definition.planning.ceilings import probe_bytes
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.result.result_fields import RecoveryTiming, StrategyInfo
from studyctl.definition.result.result_schema import CheckpointTiming, RankRequests, Result
from studyctl.units import GIB, MIB

REL_TOL = 1e-3  # rounding in the worker's own arithmetic is far below this
# An object's requests beyond its parts: a multipart upload's create and complete (or one PUT), an abort; plus a
# phase's few HEAD / LIST calls of its own (`objstore.counts.RequestCounts`).
REQUESTS_PER_OBJECT = 3
REQUESTS_PER_PHASE = 8
# Attempts of one request, at most, far above the client's own retry limit (`objstore.calls.MAX_ATTEMPTS`).
ATTEMPTS_BOUND = 100


def _fixed(path: str, got: object, want: object, what: str) -> str | None:
    return None if got == want else f"{path} = {got}, but {what} is {want}"


def _moved(path: str, got: int, want: int, what: str, slack: int) -> str | None:
    """Bytes a phase moved: exactly the plan's, or with an engine the plan's plus at most its framing (`slack`)."""
    if not slack:
        return _fixed(path, got, want, what)
    if want <= got <= want + slack:
        return None
    return f"{path} = {got}, but {what} is {want} (plus at most {slack} of the engine's framing)"


def _slack(r: Result, phase: str, files: int) -> int:
    """An engine point's framing bound of one phase (0 without an engine: the plan's bytes exactly)."""
    if r.engine is None:
        return 0
    return engine_framing_bytes(phase, files, r.engine.tensors_per_rank_max, r.point.world_size)


def _at_most(path: str, got: float, most: float, what: str) -> str | None:
    return None if got <= most else f"{path} = {got:g}, above {what} ({most:g})"


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-9)


def plan_problems(r: Result) -> Iterator[str]:
    """Every disagreement between `r` and its point's plan, first the point's world, then each section."""
    p = r.point
    checks = [_fixed("provenance.world_size", r.provenance.world_size, p.world_size, "the point's world"),
              _fixed("provenance.ranks_per_node", r.provenance.ranks_per_node, p.ranks_per_node,
                     "the point's ranks_per_node")]
    if r.provenance.ranks_on_host is not None:
        checks.append(_at_most("provenance.ranks_on_host", r.provenance.ranks_on_host, p.world_size,
                               "the point's world"))
    yield from filter(None, checks)
    if _planned(p).problem:
        yield f"point: its layout cannot exist ({_planned(p).problem})"
        return
    for section in (_sizes, _io, _sections, _checkpoints, _summary, _other):
        yield from filter(None, section(r))


@dataclass(frozen=True)
class _Planned:
    """What a point's configuration fixes, worked out once per configuration (its repetitions share it: a collect
    checks thousands of results of a few dozen configurations)."""

    problem: str | None  # why its layout cannot exist (then nothing below is worked out)
    layout: LayoutSummary | None = None
    nominal_bytes: int = 0
    restore_bytes: int = 0
    files: int = 0  # `_planned_files`


def _plan_of(p: Point) -> _Planned:
    problems = p.problems()
    if problems:
        return _Planned(problems[0])
    return _Planned(None, p.layout(), p.nominal_layout().total_bytes,
                    restore_bytes(p.model, p.parallelism, p.checkpoint), _planned_files(p))


_planned = ByConfiguration(_plan_of)


def _sizes(r: Result) -> Iterator[str | None]:
    s, opts, plan = r.sizes, r.point.checkpoint, _planned(r.point)
    assert plan.layout is not None
    total = plan.layout.total_bytes
    yield _fixed("sizes.scale", s.scale, opts.scale, "the point's scale")
    yield _fixed("sizes.written_checkpoint_bytes", s.written_checkpoint_bytes, total, "the point's layout")
    yield _fixed("sizes.nominal_checkpoint_bytes", s.nominal_checkpoint_bytes, plan.nominal_bytes,
                 "the point's layout at full size")
    yield _fixed("sizes.read_bytes_per_restore", s.read_bytes_per_restore, plan.restore_bytes,
                 f"what restore {opts.restore} reads")
    yield _at_most("sizes.files_per_checkpoint", s.files_per_checkpoint, plan.files, "the point's files")
    for name in ("bytes_per_rank_max", "bytes_per_rank_min"):
        yield _at_most(f"sizes.{name}", getattr(s, name), total, "the point's checkpoint")


def _planned_files(p: Point) -> int:
    """Files a write or a restore of the point touches at most, over all ranks (a restore `full` reads the
    replicated weights on every rank; a DCP restore may read every rank's files and `.metadata` on each)."""
    dlio = 2 * p.layout().files_per_checkpoint * max(1, p.data_parallel)
    if p.checkpoint.engine == "dcp":
        return max(dlio, p.world_size * (p.world_size * p.checkpoint.dcp_threads + 1))
    return dlio


def _io(r: Result) -> Iterator[str | None]:
    io, opts = r.io, r.point.checkpoint
    yield _fixed("io.rank_shift", io.rank_shift, opts.rank_shift, "the point's rank_shift")
    yield _fixed("io.buffer_bytes", io.buffer_bytes, opts.buffer_mib * MIB, "the point's buffer_mib")
    yield _fixed("io.block_bytes", io.block_bytes, opts.block_mib * MIB, "the point's block_mib")
    yield _fixed("io.subset_world_size", io.subset_world_size, opts.subset_world_size,
                 "the point's subset_world_size")


def _sections(r: Result) -> Iterator[str | None]:
    """A section only where the point's role or scenario makes one, and then as its plan says."""
    p = r.point
    if (r.ceilings is not None) != (p.role == "ceiling"):
        yield (f"ceilings: {'present' if r.ceilings else 'absent'} in the result of a point of role {p.role}")
    if r.recovery is not None and p.recovery is None:
        yield "recovery: present in the result of a point without a recovery scenario"
    if r.ceilings is not None:
        largest, even = probe_bytes(p)
        c = r.ceilings
        yield _fixed("ceilings.shape", c.shape, shape_of(p).key, "the point's shape")
        if c.reused_from is None:  # a reused one was probed with its own study's largest point of the shape
            yield _fixed("ceilings.largest_shard_bytes", c.largest_shard_bytes, largest, "the shape's largest shard")
            yield _fixed("ceilings.even_bytes", c.even_bytes, even, "the shape's even share")
        yield _at_most("ceilings.even_bytes", c.even_bytes, c.largest_shard_bytes, "ceilings.largest_shard_bytes")
        writes = sum(t.phase == "write" for t in r.checkpoints)
        yield _fixed("ceilings.repeats", c.repeats, writes, "the probe's rounds in the result")
        for name, rounds in c.rounds.items():  # each rate is the median of its rounds
            figure = getattr(c, name) if name in type(c).model_fields else None
            if not isinstance(figure, float) or not rounds or not _close(figure, statistics.median(rounds)):
                yield f"ceilings.rounds.{name}: not the rounds of a rate {figure} is the median of"
    if r.recovery is not None:
        yield from _recovery(r, r.recovery)


@lru_cache(maxsize=256)
def _restart_reads(model: ModelSpec, old: Parallelism, new: Parallelism, scale: float, naming: Naming,
                   restore: str) -> ReshardSummary:
    return reshard_summary(model, old, new, scale, naming, restore)


def _recovery(r: Result, x: RecoveryTiming) -> Iterator[str | None]:
    p = r.point
    assert p.recovery is not None
    old, opts = p.parallelism, p.checkpoint
    try:
        new = restart_layout(p.model, old, p.recovery)
    except ValueError as exc:
        yield f"recovery: the point's restart {p.recovery.label()} cannot exist ({exc})"
        return
    for side, par in (("old", old), ("new", new)):
        for name, want in (("world_size", par.ranks), ("tensor_parallel", par.tensor),
                           ("pipeline_parallel", par.pipeline), ("data_parallel", par.data)):
            yield _fixed(f"recovery.{side}_{name}", getattr(x, f"{side}_{name}"), want, f"the plan's {side} layout")
    yield _fixed("recovery.lost_nodes", x.lost_nodes, p.recovery.lost_nodes, "the point's scenario")
    plan = _restart_reads(p.model, old, new, opts.scale, opts.naming, opts.restore)
    yield _fixed("recovery.bytes_read", x.bytes_read, plan.total_bytes,
                 f"what the restart reads with restore {opts.restore}")
    yield _fixed("recovery.broadcast_bytes", x.broadcast_bytes, plan.broadcast_bytes,
                 f"what restore {opts.restore} broadcasts")
    yield _at_most("recovery.tier_bytes", x.tier_bytes, x.bytes_read, "recovery.bytes_read")
    yield _fixed("recovery.files_opened", x.files_opened, round(plan.files_opened_mean * plan.ranks),
                 "the files the restart opens")
    for name in ("bytes_restored_per_rank", "files_opened_per_rank"):
        yield _fixed(f"recovery.{name}", len(getattr(x, name)), new.ranks, "the restart's world (entries)")
    yield _fixed("recovery.files_opened_per_rank", sum(x.files_opened_per_rank), x.files_opened,
                 "recovery.files_opened (their sum)")
    for i, got in enumerate(x.bytes_restored_per_rank):
        yield _at_most(f"recovery.bytes_restored_per_rank.{i}", got, plan.bytes_per_rank_max + x.broadcast_bytes,
                       "a rank's planned bytes")
    parts = x.launch_s + x.setup_s + x.restore_s + x.ready_s
    if not _close(x.time_to_first_step_s, parts):
        yield (f"recovery.time_to_first_step_s = {x.time_to_first_step_s:g}, but launch + setup + restore + ready = "
               f"{parts:g}")
    for name in ("read_s", "broadcast_s"):
        yield _at_most(f"recovery.{name}", getattr(x, name), x.restore_s * (1 + REL_TOL) + 1e-6, "recovery.restore_s")


def _expected_bytes(r: Result) -> dict[str, int]:
    if r.ceilings is not None:  # a ceiling point's checkpoints are its probe: at most one largest shard per rank
        return dict.fromkeys(("write", "read"), r.ceilings.largest_shard_bytes * r.point.world_size)
    return {"write": r.sizes.written_checkpoint_bytes, "read": r.sizes.read_bytes_per_restore}


def _phase_bytes(r: Result, path: str, got: int, phase: str, files: int, want: int) -> str | None:
    """A phase's bytes against the plan's (`want`); a ceiling's probe streams at most its shard (it may stop at its
    time bound, definition.planning.ceilings.PROBE_STREAM_S, or its byte bound)."""
    if r.ceilings is not None:
        return _at_most(path, got, want, "the probe's largest shard on every rank")
    return _moved(path, got, want, f"what a {phase} moves by the point's sizes", _slack(r, phase, files))


def _planned_count(r: Result, phase: str) -> int:
    if r.ceilings is not None:
        return r.ceilings.repeats
    return r.point.checkpoint.writes if phase == "write" else r.point.checkpoint.reads


def _checkpoints(r: Result) -> Iterator[str | None]:
    expected = _expected_bytes(r)
    files = r.point.world_size if r.ceilings is not None else _planned(r.point).files
    last = {phase: _planned_count(r, phase) - 1 for phase in ("write", "read")}
    for i, c in enumerate(r.checkpoints):
        at = f"checkpoints.{i}"
        if c.index > last[c.phase]:
            yield _at_most(f"{at}.index", c.index, last[c.phase], f"the point's last {c.phase}")
        yield _phase_bytes(r, f"{at}.bytes", c.bytes, c.phase, c.files, expected[c.phase])
        if c.files > files:
            yield _at_most(f"{at}.files", c.files, files, "the point's files")
        yield from _checkpoint(at, c, r)


def _checkpoint(at: str, c: CheckpointTiming, r: Result) -> Iterator[str]:
    """One checkpoint against its ranks (a rule is tested inline, its message made only when it fails: this
    runs for every rank of every checkpoint of every result a collect reads). The ranks are gone over once for
    their sums, their slowest and whether any breaks a rule of its own; only then are they gone over again, in
    order, to name it."""
    world, ranks = r.point.world_size, c.ranks
    slack = c.span_s * (1 + REL_TOL) + 1e-6
    moved = opened = 0
    slowest = ranks[0].duration_s if ranks else 0.0
    suspect = False
    for x in ranks:
        moved += x.bytes
        opened += x.files
        took = x.duration_s
        if took > slowest:  # as max() picks
            slowest = took
        if (x.rank >= world or took > slack or x.end_s > slack or x.requests is not None
                or (x.bytes and took <= 0)):
            suspect = True
    if len(ranks) != world:
        yield f"{at}.ranks = {len(ranks)}, but the point's world (entries) is {world}"
    if moved != c.bytes:
        yield f"{at}.ranks: their bytes add up to {moved}, not {at}.bytes {c.bytes}"
    if opened != c.files:
        yield f"{at}.ranks: their files add up to {opened}, not {at}.files {c.files}"
    if c.bytes and (c.span_s <= 0 or c.duration_max_s <= 0):
        yield f"{at}.span_s: {c.bytes} bytes in {min(c.span_s, c.duration_max_s)} s"
    if suspect:
        yield from _rank_problems(at, c, r, slack)
    if ranks and not _close(c.duration_max_s, slowest):
        yield f"{at}.duration_max_s = {c.duration_max_s:g}, but its slowest rank took {slowest:g}"
    if c.bytes and not _close(c.aggregate_GiBps, c.bytes / GIB / c.span_s):
        yield f"{at}.aggregate_GiBps = {c.aggregate_GiBps:g}, but bytes / span_s = {c.bytes / GIB / c.span_s:g}"


def _rank_problems(at: str, c: CheckpointTiming, r: Result, slack: float) -> Iterator[str]:
    """Each rank's own rules, in rank order: its number, its time for its bytes, its times within the span, its
    requests."""
    world = r.point.world_size
    for j, x in enumerate(c.ranks):
        if x.rank >= world:
            yield f"{at}.ranks.{j}.rank = {x.rank:g}, above the point's last rank ({world - 1:g})"
        if x.bytes and x.duration_s <= 0:
            yield f"{at}.ranks.{j}.duration_s: rank {x.rank} moved {x.bytes} bytes in {x.duration_s} s"
        for name, got in (("duration_s", x.duration_s), ("end_s", x.end_s)):
            if got > slack:
                yield f"{at}.ranks.{j}.{name} = {got:g}, above {at}.span_s ({slack:g})"
        if x.requests is not None:
            yield from filter(None, _requests(f"{at}.ranks.{j}.requests", x.requests, c, r))


def _requests(at: str, q: RankRequests, c: CheckpointTiming, r: Result) -> Iterator[str | None]:
    """A rank's requests in one phase: at most one per part of the phase's bytes plus a few per object, however
    the objects are shared out; retries and throttled answers at most ATTEMPTS_BOUND per request."""
    part = r.point.checkpoint.part_mib * MIB
    objects = max(c.files, r.sizes.files_per_checkpoint)
    most = -(-c.bytes // part) + REQUESTS_PER_OBJECT * objects + REQUESTS_PER_PHASE
    what = f"the phase's {c.bytes} bytes in parts of {r.point.checkpoint.part_mib} MiB and {objects} objects"
    for kind in ("put", "part", "get", "head", "list", "delete"):
        yield _at_most(f"{at}.{kind}", getattr(q, kind), most, what)
    for kind in ("retries", "throttled"):
        yield _at_most(f"{at}.{kind}", getattr(q, kind), most * ATTEMPTS_BOUND, f"{ATTEMPTS_BOUND} per request")
    if q.first_byte_s is not None:
        yield _at_most(f"{at}.first_byte_s", q.first_byte_s, c.span_s * (1 + REL_TOL) + 1e-6, "the phase's span")


def _summary(r: Result) -> Iterator[str | None]:
    for phase, s in r.summary.items():
        own = [c for c in r.checkpoints if c.phase == phase]
        at = f"summary.{phase}"
        yield _fixed(f"{at}.checkpoints", s.checkpoints, len(own), f"the result's {phase} checkpoints")
        yield _phase_bytes(r, f"{at}.bytes_per_checkpoint", s.bytes_per_checkpoint, phase,
                           max((c.files for c in own), default=0), _expected_bytes(r)[phase])
        if not own:
            continue
        fastest = max(c.aggregate_GiBps for c in own) * (1 + REL_TOL)
        for name in ("aggregate_GiBps_mean", "aggregate_GiBps_min", "aggregate_GiBps_max"):
            yield _at_most(f"{at}.{name}", getattr(s, name), fastest, "its fastest checkpoint")
        slowest = max(c.duration_max_s for c in own) * (1 + REL_TOL) + 1e-6
        for name in ("duration_s_mean", "duration_max_s", "mlperf_duration_s_mean"):
            if getattr(s, name) is not None:
                yield _at_most(f"{at}.{name}", getattr(s, name), slowest, "its slowest checkpoint")


def _other(r: Result) -> Iterator[str | None]:
    fs = r.filesystem
    for name in ("free_bytes_before", "free_bytes_after"):
        yield _at_most(f"filesystem.{name}", getattr(fs, name), max(fs.total_bytes, 0) or math.inf,
                       "filesystem.total_bytes")
    size = r.sizes.written_checkpoint_bytes / GIB
    if r.ceilings is None and not _close(r.dlio.checkpoint_size_GB, size):
        yield f"dlio.checkpoint_size_GB = {r.dlio.checkpoint_size_GB:g}, but the point writes {size:g} GiB"
    if r.strategy is not None:
        yield from _strategy(r, r.strategy)


def _strategy(r: Result, s: StrategyInfo) -> Iterator[str | None]:
    p, opts, lay = r.point, r.point.checkpoint, _planned(r.point).layout
    assert lay is not None
    yield _at_most("strategy.snapshot_bytes_per_rank_max", s.snapshot_bytes_per_rank_max, lay.bytes_per_rank_max,
                   "the point's largest shard")
    yield _at_most("strategy.replaced_nodes", s.replaced_nodes, p.nodes, "the point's nodes")
    if s.tier_keep is not None:
        yield _at_most("strategy.tier_keep", s.tier_keep, max(opts.tier_keep, opts.writes), "the point's tier_keep")
    read = r.sizes.read_bytes_per_restore
    files = {(c.phase, c.index): c.files for c in r.checkpoints}
    for i, t in enumerate(s.checkpoints):
        at = f"strategy.checkpoints.{i}"
        slack = _slack(r, t.phase, files.get((t.phase, t.index), 0))
        yield _at_most(f"{at}.index", t.index, _planned_count(r, t.phase) - 1, f"the point's last {t.phase}")
        yield _at_most(f"{at}.background_bytes", t.background_bytes, lay.total_bytes + slack, "the point's checkpoint")
        for name in ("tier_bytes", "shared_bytes", "broadcast_bytes"):
            yield _at_most(f"{at}.{name}", getattr(t, name), read + slack, "what a restore reads")
