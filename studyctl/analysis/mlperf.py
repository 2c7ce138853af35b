"""The MLPerf Storage view: does a study meet v2.0 checkpointing's CLOSED rules, and its figures in MLPerf's units.

Pure: functions of result records (and where the results live, handed in). Rules and units from
shared notes `mlperf-rules.md`: processes 8/64/512/1024 for 8B/70B/405B/1T with their TP×PP and
ZeRO, 10 writes then 10 reads, fsync, the page cache cleared between writing and reading unless a
node wrote at least 3× its memory, checkpoint and results on different filesystems, subset mode only
for node-local storage (one host, 8 processes). Figures: GB = 10^9 B; a checkpoint's duration is the
maximum over processes; its throughput the minimum over processes of (checkpoint size / that
process's duration), which is checkpoint size / duration.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean

from studyctl.definition.catalog import ALIASES, MLPERF_SHAPES
from studyctl.definition.result_schema import Result
from studyctl.units import GB

MLPERF_WRITES = MLPERF_READS = 10
PAGE_CACHE_FACTOR = 3  # per-node data below 3x node memory: the cache must be cleared before reading
SUBSET_PROCESSES = 8


@dataclass(frozen=True)
class RuleCheck:
    rule: str
    passed: bool
    why: str


@dataclass(frozen=True)
class Figures:
    """One point's MLPerf figures: means over its checkpoints (None when the phase did not run)."""

    checkpoint_GB: float
    write_duration_s: float | None
    write_throughput_GBps: float | None
    read_duration_s: float | None
    read_throughput_GBps: float | None


@dataclass(frozen=True)
class PointVerdict:
    point_id: str
    label: str
    checks: list[RuleCheck]
    figures: Figures

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


@dataclass
class ModelVerdict:
    model: str
    points: list[PointVerdict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return any(p.passed for p in self.points)

    def unmet(self) -> list[str]:
        """Rules no point of this model met."""
        rules = [c.rule for c in self.points[0].checks] if self.points else []
        return [r for r in rules if not any(c.passed for p in self.points for c in p.checks if c.rule == r)]


def mlperf_name(model: str) -> str | None:
    name = ALIASES.get(model, model)
    return name if name in MLPERF_SHAPES else None


def check_shape(r: Result) -> list[RuleCheck]:
    """Process count, TP × PP × ZeRO of the model's CLOSED shape (subset mode: 8 of them), unscaled tensors."""
    p, opts = r.point, r.point.checkpoint
    name = mlperf_name(p.model.name)
    if name is None:
        why = f"{p.model.name} is not one of MLPerf's checkpointing models ({', '.join(MLPERF_SHAPES)})"
        return [RuleCheck("processes", False, why), RuleCheck("layout", False, why),
                RuleCheck("full size", False, why)]
    procs, tp, pp, zero = MLPERF_SHAPES[name]
    full = opts.subset_world_size or p.world_size
    where = f" (subset of {full})" if opts.subset_world_size else ""
    processes = RuleCheck("processes", full == procs,
                          f"{p.world_size} processes{where}; CLOSED runs {name} with {procs}")
    layout = RuleCheck("layout", (p.tensor_parallel, p.pipeline_parallel, p.zero_stage) == (tp, pp, zero),
                       f"TP{p.tensor_parallel}×PP{p.pipeline_parallel} ZeRO-{p.zero_stage}; "
                       f"CLOSED: TP{tp}×PP{pp} ZeRO-{zero}")
    scale = opts.scale
    size = RuleCheck("full size", scale >= 1, "every tensor at its real size" if scale >= 1 else
                     f"tensors scaled to {scale:g} of the model (checkpoint.scale): not the checkpoint MLPerf writes")
    return [processes, layout, size]


def check_procedure(r: Result) -> list[RuleCheck]:
    writes = sum(1 for c in r.checkpoints if c.phase == "write")
    reads = sum(1 for c in r.checkpoints if c.phase == "read")
    order = RuleCheck("10 writes, 10 reads", writes == MLPERF_WRITES and reads == MLPERF_READS,
                      f"{writes} writes then {reads} reads")
    synced = r.io.fsync_per_file
    fsync = RuleCheck("fsync", synced, "every file fsynced" if synced else "no fsync (as DLIO): not stable storage")
    return [order, fsync]


def node_bytes_max(r: Result) -> int:
    """Bytes the busiest node wrote in one checkpoint (ranks are placed in blocks of ranks_per_node)."""
    writes = [c for c in r.checkpoints if c.phase == "write"]
    if not writes:
        return 0
    per_node: dict[int, int] = defaultdict(int)
    for rank in writes[0].ranks:
        per_node[rank.rank // r.point.ranks_per_node] += rank.bytes
    return max(per_node.values(), default=0)


def check_page_cache(r: Result, host_memory_bytes: int | None) -> RuleCheck:
    """Cleared cache (or data too large to be cached) before the reads: the 3×-memory rule."""
    rule = "page cache"
    node = node_bytes_max(r)
    if host_memory_bytes and node >= PAGE_CACHE_FACTOR * host_memory_bytes:
        return RuleCheck(rule, True, f"a node wrote {node / GB:.1f} GB, at least 3× its {host_memory_bytes / GB:.1f} "
                                     "GB of memory: no clearing needed")
    method = r.io.cold_read_method
    if method == "direct":
        return RuleCheck(rule, True, "reads bypass the page cache (O_DIRECT)")
    if method == "fadvise":
        return RuleCheck(rule, True, "the checkpoint's pages are evicted before each read (posix_fadvise "
                                     "DONTNEED), the effect of the two-invocation workflow with drop_caches")
    memory = f"{host_memory_bytes / GB:.1f} GB" if host_memory_bytes else "unknown memory"
    return RuleCheck(rule, False, f"reads may come from the page cache: a node wrote {node / GB:.1f} GB, under 3× "
                                  f"its {memory}; run write and read as two invocations with drop_caches between")


def check_filesystems(r: Result, results_mount: str | None) -> RuleCheck:
    rule = "separate filesystems"
    ckpt = r.filesystem.mount_point
    if results_mount is None:
        return RuleCheck(rule, False, "the results directory's filesystem is unknown")
    if ckpt == results_mount:
        return RuleCheck(rule, False, f"checkpoints and results are both on {ckpt}")
    return RuleCheck(rule, True, f"checkpoints on {ckpt}, results on {results_mount}")


def check_subset(r: Result) -> RuleCheck:
    p = r.point
    if not p.checkpoint.subset_world_size:
        return RuleCheck("subset mode", True, "full run (no subset)")
    ok = p.nodes == 1 and p.world_size == SUBSET_PROCESSES
    return RuleCheck("subset mode", ok, f"{p.nodes} host(s) × {p.ranks_per_node} processes write "
                     f"{p.world_size}/{p.checkpoint.subset_world_size} of the checkpoint; allowed for node-local "
                     f"storage with one host of {SUBSET_PROCESSES} processes (2026: 8B only)")


def figures(r: Result) -> Figures:
    def phase(name: str) -> tuple[float | None, float | None]:
        done = [c for c in r.checkpoints if c.phase == name and c.duration_max_s > 0]
        if not done:
            return None, None
        return (mean(c.duration_max_s for c in done), mean(c.bytes / GB / c.duration_max_s for c in done))

    write, read = phase("write"), phase("read")
    return Figures(r.sizes.written_checkpoint_bytes / GB, *write, *read)


def judge(r: Result, results_mount: str | None) -> PointVerdict:
    p = r.point
    checks = [*check_shape(r), *check_procedure(r), check_page_cache(r, r.provenance.host_memory_bytes),
              check_filesystems(r, results_mount), check_subset(r)]
    label = (f"{p.nodes}×{p.ranks_per_node} TP{p.tensor_parallel}×PP{p.pipeline_parallel} ZeRO-{p.zero_stage} "
             f"{p.filesystem} {p.io_mode} rep {p.repetition}")
    return PointVerdict(r.point_id, label, checks, figures(r))


def mlperf_view(results: Iterable[Result], results_mount: str | None) -> list[ModelVerdict]:
    """Per model (catalog order of first appearance), every point judged against every rule."""
    by_model: dict[str, ModelVerdict] = {}
    for r in results:
        name = r.point.model.name
        by_model.setdefault(name, ModelVerdict(name)).points.append(judge(r, results_mount))
    return list(by_model.values())
