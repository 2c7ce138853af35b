"""One result → one plain row of what its checkpoints cost training: means over its checkpoints and restores.

Built once per result file when it is parsed (the parse cache keeps it as plain JSON), so the training table is
a DataFrame of these rows and whole-column arithmetic: re-collecting after one file changed redoes one row.
Results from before strategies count as sync (training blocked for the whole write); fields newer workers add
(idle step, interference CI, launch time, host cores) are None in older results.
"""

from __future__ import annotations

import math
from typing import Any

from studyctl.definition.checkpoint.points import Point, restore_bytes
from studyctl.definition.checkpoint.restore_reads import storage_read_bytes
from studyctl.definition.result.result_schema import CheckpointTiming, Result

RESTART_FIELDS = ("launch_s", "setup_s", "restore_s", "ready_s", "time_to_first_step_s")


def restart_row(r: Result) -> dict[str, Any]:
    """The restart's phases as `restart_<phase>` (None without a recovery)."""
    x = r.recovery
    return {f"restart_{f}": getattr(x, f) if x is not None else None for f in RESTART_FIELDS}

# Per-checkpoint strategy fields averaged over a point's writes, and over its restores.
WRITE_FIELDS = ("blocking_s", "background_s", "background_bytes", "compute_steps", "compute_step_s_mean",
                "compute_slowdown", "interference_s", "idle_step_s_mean")
READ_FIELDS = ("tier_bytes", "shared_bytes", "read_s", "broadcast_s", "broadcast_bytes")
# Provenance a newer worker records (None in older results).
HOST_FIELDS = ("host_cores", "ranks_on_host", "background_threads_on_host", "launch_s")


def engine_row(r: Result) -> dict[str, Any]:
    """An engine point's means over its checkpoints, per phase (the slowest rank's seconds): `engine_<phase>_s` the
    engine's call, `engine_<phase>_storage_s` of it inside storage calls (None where the engine writes its paths
    itself, or in any checkpoint not recorded); `staged_s`: an async save's copy off the live tensors."""
    info = getattr(r, "engine", None)  # None: stream, and results from before engines
    timings = list(info.checkpoints) if info is not None else []
    out: dict[str, Any] = {}
    for phase in ("write", "read"):
        mine = [t for t in timings if t.phase == phase]
        storage = [t.storage_s for t in mine]
        out[f"engine_{phase}_s"] = _mean([t.engine_s for t in mine])
        out[f"engine_{phase}_storage_s"] = _mean(storage) if None not in storage else None
    out["staged_s"] = _mean([t.staged_s for t in timings if t.phase == "write"])
    return out


def _mean(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return math.fsum(known) / len(known) if known else None


def _ci_of_mean(halves: list[Any]) -> float | None:
    """95% half-width of the mean of independent per-checkpoint estimates: sqrt(Σ half²) / k."""
    known = [float(h) for h in halves if h is not None]
    return math.sqrt(math.fsum(h * h for h in known)) / len(known) if known else None


def _measured(r: Result) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(writes, restores) as plain per-checkpoint dicts of the fields above, plus bytes and span."""
    timing = {(c.phase, c.index): c for c in r.checkpoints}
    writes: list[dict[str, Any]] = []
    reads: list[dict[str, Any]] = []
    if r.strategy is None:
        for c in r.checkpoints:
            own = {"blocking_s": c.duration_max_s} if c.phase == "write" else {"shared_bytes": c.bytes,
                                                                                 "read_s": c.duration_max_s}
            (writes if c.phase == "write" else reads).append({**own, "bytes": c.bytes, "span_s": c.span_s})
        return writes, reads
    for s in r.strategy.checkpoints:
        measured: CheckpointTiming | None = timing.get((s.phase, s.index))
        if measured is None:
            continue
        names = WRITE_FIELDS if s.phase == "write" else READ_FIELDS
        row = {n: getattr(s, n, None) for n in names}
        row.update(bytes=measured.bytes, span_s=measured.span_s,
                   interference_ci_s=getattr(s, "interference_ci_s", None))
        (writes if s.phase == "write" else reads).append(row)
    return writes, reads


def nominal_restore(p: Point) -> dict[str, int]:
    """What one restore of the point moves at full size (scale 1), and of it what is read from files (the restore
    mode's rule: what arrives by MPI_Bcast is not): the bytes its projections scale with."""
    full = p.checkpoint.model_copy(update={"scale": 1.0, "rank_shift": 0})
    return {"nominal_restore_bytes": restore_bytes(p.model, p.parallelism, full),
            "nominal_restore_file_bytes": storage_read_bytes(p.model, p.parallelism, full)}


def point_cost_row(r: Result, base: dict[str, Any]) -> dict[str, Any]:
    """The point's settings (`base`), its strategy facts, and the means of what its checkpoints measured."""
    opts, info, prov = r.point.checkpoint, r.strategy, r.provenance
    tiered = opts.strategy == "tiered"
    writes, reads = _measured(r)
    row = {**base, "drain": opts.drain if tiered else None, "tier_keep": opts.tier_keep if tiered else None,
           "replaced_nodes": opts.replaced_nodes if tiered else None, "step_s": opts.step_s,
           "compute": getattr(opts, "compute", None), "allreduce_mib": getattr(opts, "allreduce_mib", None),
           "tier_fstype": info.tier_fstype if info is not None else None,
           **{f: getattr(prov, f, None) for f in HOST_FIELDS}, "writes": len(writes), "restores": len(reads)}
    row.update({f: _mean([w.get(f) for w in writes]) for f in WRITE_FIELDS})
    row.update({f: _mean([x.get(f) for x in reads]) for f in READ_FIELDS})
    row.update(restart_row(r))  # a recovery point's measured restart after a failure, None elsewhere
    row.update(engine_row(r))
    row.update(interference_ci_s=_ci_of_mean([w.get("interference_ci_s") for w in writes]),
               checkpoint_bytes=_mean([w["bytes"] for w in writes]), durable_s=_mean([w["span_s"] for w in writes]),
               restore_s=_mean([x["span_s"] for x in reads]), restore_bytes=_mean([x["bytes"] for x in reads]))
    return row
