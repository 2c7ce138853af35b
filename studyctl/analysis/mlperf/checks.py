"""The checks the MLPerf rule sets name (`mlperf.rules.Rule.check`): pure functions of one result, where the
study's files live, and the rule's parameters, each returning a verdict (pass, fail or unknown) and why.

An object-storage point is one whose filesystem the study's sweep copy declares `kind: s3`, or whose result
records an `s3://` path or mount or fstype `s3` (results are read, never the code that writes them). For
objects there is no client page cache (studyctl's client keeps none: every GET reaches the server) and no
results directory on the storage under test (results go to a local path, checkpoints to a bucket).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from studyctl.definition.inputs.catalog import ALIASES, MLPERF_SHAPES
from studyctl.definition.result.result_schema import Result
from studyctl.units import GB

Verdict = Literal["pass", "fail", "unknown"]
Outcome = tuple[Verdict, str]
OBJECT_KINDS = ("s3",)


@dataclass(frozen=True)
class Where:
    """Facts about the study beyond one result: the results directory's mount, and the sweep copy's filesystems
    (name → its spec as written: kind, path, endpoint, ...)."""

    results_mount: str | None
    filesystems: dict[str, dict[str, Any]] = field(default_factory=dict, hash=False)

    def spec(self, r: Result) -> dict[str, Any]:
        return self.filesystems.get(r.point.filesystem, {})

    def api(self, r: Result) -> str:
        """"object" for an object-storage point, else "posix"."""
        fs = r.filesystem
        recorded = fs.fstype in OBJECT_KINDS or fs.path.startswith("s3://") or fs.mount_point.startswith("s3://")
        return "object" if self.spec(r).get("kind") in OBJECT_KINDS or recorded else "posix"


def mlperf_name(model: str) -> str | None:
    name = ALIASES.get(model, model)
    return name if name in MLPERF_SHAPES else None


def _not_mlperf(r: Result) -> Outcome:
    return "fail", f"{r.point.model.name} is not one of MLPerf's checkpointing models ({', '.join(MLPERF_SHAPES)})"


def _ok(passed: bool, why: str) -> Outcome:
    return ("pass" if passed else "fail"), why


def processes(r: Result, where: Where) -> Outcome:
    p, name = r.point, mlperf_name(r.point.model.name)
    if name is None:
        return _not_mlperf(r)
    full = p.checkpoint.subset_world_size or p.world_size
    subset = f" (subset of {full})" if p.checkpoint.subset_world_size else ""
    return _ok(full == MLPERF_SHAPES[name][0],
               f"{p.world_size} processes{subset}; CLOSED runs {name} with {MLPERF_SHAPES[name][0]}")


def layout(r: Result, where: Where) -> Outcome:
    p, name = r.point, mlperf_name(r.point.model.name)
    if name is None:
        return _not_mlperf(r)
    _, tp, pp, zero = MLPERF_SHAPES[name]
    return _ok((p.tensor_parallel, p.pipeline_parallel, p.zero_stage) == (tp, pp, zero),
               f"TP{p.tensor_parallel}×PP{p.pipeline_parallel} ZeRO-{p.zero_stage}; CLOSED: TP{tp}×PP{pp} ZeRO-{zero}")


def full_size(r: Result, where: Where) -> Outcome:
    if mlperf_name(r.point.model.name) is None:
        return _not_mlperf(r)
    scale = r.point.checkpoint.scale
    return _ok(scale >= 1, "every tensor at its real size" if scale >= 1 else
               f"tensors scaled to {scale:g} of the model (checkpoint.scale): not the checkpoint MLPerf writes")


def per_host(r: Result, where: Where, minimum: int) -> Outcome:
    rpn = r.point.ranks_per_node
    return _ok(rpn >= minimum, f"{rpn} processes per host; CLOSED allows any count per host of at least {minimum}")


def procedure(r: Result, where: Where, writes: int, reads: int) -> Outcome:
    done = {phase: sum(1 for c in r.checkpoints if c.phase == phase) for phase in ("write", "read")}
    return _ok((done["write"], done["read"]) == (writes, reads),
               f"{done['write']} writes then {done['read']} reads; the rules ask for {writes} then {reads}")


def fsync(r: Result, where: Where, object_put_is_stable: bool) -> Outcome:
    if where.api(r) == "object":
        if object_put_is_stable:
            return "pass", "objects: each exists only once its PUT (or multipart completion) succeeded"
        return "fail", "objects have no fsync; this edition asks for fsynced files"
    synced = r.io.fsync_per_file
    return _ok(synced, "every file fsynced" if synced else "no fsync (as DLIO): not stable storage")


def node_bytes_max(r: Result) -> int:
    """Bytes the busiest node wrote in one checkpoint (ranks are placed in blocks of ranks_per_node)."""
    writes = [c for c in r.checkpoints if c.phase == "write"]
    per_node: dict[int, int] = defaultdict(int)
    for rank in writes[0].ranks if writes else ():
        per_node[rank.rank // r.point.ranks_per_node] += rank.bytes
    return max(per_node.values(), default=0)


def page_cache(r: Result, where: Where, factor: int) -> Outcome:
    """Cleared cache (or data too large to be cached) before the reads: the factor×-memory rule."""
    if where.api(r) == "object":
        return "pass", "object reads: studyctl's client keeps no cache, every GET reaches the server"
    node, memory = node_bytes_max(r), r.provenance.host_memory_bytes
    if memory and node >= factor * memory:
        return "pass", (f"a node wrote {node / GB:.1f} GB, at least {factor}× its {memory / GB:.1f} GB of memory: "
                        "no clearing needed")
    method = r.io.cold_read_method
    if method == "direct":
        return "pass", "reads bypass the page cache (O_DIRECT)"
    if method == "fadvise":
        return "pass", ("the checkpoint's pages are evicted before each read (posix_fadvise DONTNEED), the effect "
                        "of the two-invocation workflow with drop_caches")
    known = f"{memory / GB:.1f} GB" if memory else "unknown memory"
    return "fail", (f"reads may come from the page cache: a node wrote {node / GB:.1f} GB, under {factor}× its "
                    f"{known}; run write and read as two invocations with drop_caches between")


def filesystems(r: Result, where: Where) -> Outcome:
    if where.api(r) == "object":
        return "pass", f"checkpoints in a bucket ({r.filesystem.path}), results on a local path"
    ckpt = r.filesystem.mount_point
    if where.results_mount is None:
        return "unknown", "the results directory's filesystem is unknown"
    if ckpt == where.results_mount:
        return "fail", f"checkpoints and results are both on {ckpt}"
    return "pass", f"checkpoints on {ckpt}, results on {where.results_mount}"


def subset(r: Result, where: Where, models: tuple[str, ...], processes: int, hosts: int) -> Outcome:
    p = r.point
    if not p.checkpoint.subset_world_size:
        return "pass", "full run (no subset)"
    name = mlperf_name(p.model.name) or p.model.name
    ok = name in models and p.nodes == hosts and p.world_size == processes
    return _ok(ok, f"{name}: {p.nodes} host(s) × {p.ranks_per_node} processes write {p.world_size}/"
                   f"{p.checkpoint.subset_world_size} of the checkpoint; subset runs allowed for "
                   f"{', '.join(models)} with {hosts} host of {processes} processes")


def storage_api(r: Result, where: Where, apis: tuple[str, ...]) -> Outcome:
    api = where.api(r)
    return _ok(api in apis, f"{api} storage ({r.filesystem.path}); this edition's checkpointing measures "
                            f"{' and '.join(apis)} storage")


def accelerator_memory(r: Result, where: Where, accelerators: dict[str, int]) -> Outcome:
    """Unknown unless even the largest accelerator cannot hold the full-size checkpoint: studyctl has no
    accelerator type (MLPerf's --accelerator-type)."""
    p = r.point
    count = p.checkpoint.subset_world_size or p.world_size
    size = r.sizes.nominal_checkpoint_bytes / GB
    fits = {name: count * gb for name, gb in accelerators.items()}
    if max(fits.values()) < size:
        return "fail", f"{count} accelerators of at most {max(accelerators.values())} GB cannot hold {size:.1f} GB"
    sums = ", ".join(f"{name}: {count} × {gb} GB = {fits[name]} GB" for name, gb in accelerators.items())
    return "unknown", f"no accelerator type is declared (studyctl has none); full checkpoint {size:.1f} GB vs {sums}"


def backend_declared(r: Result, where: Where) -> Outcome:
    if where.api(r) != "object":
        return "pass", "not object storage: no storage-backend settings"
    if where.spec(r).get("endpoint"):
        return "pass", "endpoint, region and addressing come from the sweep (the run's configuration)"
    return "unknown", ("the endpoint comes from the SDK's defaults and environment, not the sweep: declare it "
                       "(undeclared backend environment moves a result to OPEN)")


CHECKS: dict[str, Callable[..., Outcome]] = {f.__name__: f for f in (
    processes, layout, full_size, per_host, procedure, fsync, page_cache, filesystems, subset, storage_api,
    accelerator_memory, backend_declared)}
