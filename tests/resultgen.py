"""Hand-made result files that validate against `definition.result.result_schema.Result`, with bandwidths the test
chooses.

Used by the collect/report/compare tests and by benchmarks/collect_bench.py, so neither needs MPI.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from studyctl.definition.checkpoint.layout import rank_files
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, restore_bytes
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.planning.ceilings import ceiling_of, probe_bytes
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.result.result_schema import Result

GIB = 1 << 30


def make_point(model: str = "gpt2-125m", zero: int = 1, nodes: int = 1, rpn: int = 2, fs: str = "scratch",
               io_mode: str = "buffered", rep: int = 0, writes: int = 2, reads: int = 2, **options: Any) -> Point:
    """A point; `options` sets any checkpoint option (block_mib=1, rank_shift=2, restore="full", ...)."""
    ckpt = {"scale": 0.01, "writes": writes, "reads": reads, "buffer_mib": 4, "block_mib": 4, **options}
    return Point(model=lookup(model), zero_stage=zero, nodes=nodes, ranks_per_node=rpn, filesystem=fs,
                 io_mode=io_mode, repetition=rep, checkpoint=CheckpointOptions(**ckpt))


def _split(duration: float, shares: dict[str, float] | None) -> dict[str, float] | None:
    """A RankSplit of `duration` with the given shares of open, fsync and close; transfer takes the rest but 2%."""
    if shares is None:
        return None
    parts = {f"{k}_s": duration * shares.get(k, 0.0) for k in ("open", "fsync", "close")}
    parts["transfer_s"] = duration * max(0.0, 0.98 - sum(shares.values()))
    return {**parts, "other_s": max(0.0, duration - sum(parts.values()))}


def layout_bytes(point: Point) -> list[tuple[int, int]]:
    """(bytes, files) per rank as the layout writes them (`definition.checkpoint.layout.rank_files`)."""
    out = []
    for r in range(point.world_size):
        files = rank_files(point.model, point.parallelism, r, point.checkpoint.scale)
        out.append((sum(f.nbytes for f in files), len(files)))
    return out


def _rank_bytes(point: Point, nbytes: int, movers: int, by_layout: bool) -> list[tuple[int, int]]:
    if by_layout:
        return layout_bytes(point)
    per_rank = nbytes // movers
    return [((per_rank + (nbytes - per_rank * movers if r == 0 else 0)) if r < movers else 0, 2)
            for r in range(point.world_size)]


def _checkpoint(point: Point, phase: str, index: int, gibps: float, nbytes: int,
                spread: float, writers: int | None = None, split: dict[str, float] | None = None,
                by_layout: bool = False) -> dict[str, Any]:
    """One checkpoint whose aggregate bandwidth is exactly `gibps`; ranks vary by ±spread.

    `writers`: how many ranks move bytes (default all; ZeRO-0 writes from the first data-parallel replica only).
    `split`: shares of each rank's time in open, fsync and close (a RankSplit per rank); `by_layout`: each rank's
    bytes and files as the layout has them (else even).
    """
    world = point.world_size
    span = nbytes / GIB / gibps
    ranks = []
    for r, (rb, files) in enumerate(_rank_bytes(point, nbytes, writers or world, by_layout)):
        factor = 1.0 - spread * (r / max(1, world - 1))  # rank 0 fastest, last rank slowest
        duration = span * factor
        ranks.append({"rank": r, "host": f"node{r // point.ranks_per_node}", "start_s": span - duration,
                      "end_s": span, "bytes": rb, "files": files, "duration_s": duration,
                      "bandwidth_GiBps": rb / GIB / duration if rb else 0.0, "split": _split(duration, split)})
    bws = [x["bandwidth_GiBps"] for x in ranks if x["bytes"]]
    return {"phase": phase, "index": index, "step_dir": f"global_step{index}", "bytes": nbytes,
            "files": sum(x["files"] for x in ranks),
            "duration_max_s": max(x["duration_s"] for x in ranks), "span_s": span, "aggregate_GiBps": gibps,
            "rank_bandwidth_min_GiBps": min(bws), "rank_bandwidth_max_GiBps": max(bws), "ranks": ranks}


def _phase_summary(cps: list[dict[str, Any]]) -> dict[str, Any]:
    agg = [c["aggregate_GiBps"] for c in cps]
    dur = [c["duration_max_s"] for c in cps]
    return {"checkpoints": len(cps), "bytes_per_checkpoint": cps[0]["bytes"],
            "aggregate_GiBps_mean": statistics.fmean(agg),
            "aggregate_GiBps_stdev": statistics.stdev(agg) if len(agg) > 1 else 0.0,
            "aggregate_GiBps_min": min(agg), "aggregate_GiBps_max": max(agg),
            "duration_s_mean": statistics.fmean(dur),
            "duration_s_stdev": statistics.stdev(dur) if len(dur) > 1 else 0.0,
            "duration_max_s": max(dur),
            "rank_bandwidth_min_GiBps": min(c["rank_bandwidth_min_GiBps"] for c in cps),
            "mlperf_duration_s_mean": statistics.fmean(dur),
            "mlperf_throughput_GiBps_mean": statistics.fmean(c["bytes"] / GIB / c["duration_max_s"] for c in cps)}


def result_dict(point: Point, write_gibps: list[float], read_gibps: list[float] | None = None,
                attempt: int = 1, study: str = "gen", nbytes: int | None = None, spread: float = 0.2,
                mount_options: str = "rw,relatime", cluster: str | None = None, io_mode_used: str | None = None,
                fstype: str = "ext4", writers: int | None = None, simulated: bool = True,
                strategy: dict[str, Any] | None = None, tier_fstype: str | None = None,
                split: dict[str, float] | None = None, by_layout: bool = False,
                ceilings: dict[str, Any] | None = None, resident: tuple[int, int] | None = None) -> dict[str, Any]:
    """A result as the worker would write it; one checkpoint per listed bandwidth.

    `resident`: every restore's residency sample, (pages resident before the read, pages sampled); None: none.
    `io_mode_used` other than the point's: the worker fell back (direct_fallback); `fstype` "tmpfs": memory.
    `nbytes`: bytes per checkpoint; default the point's layout (collect refuses sizes that disagree with it).
    `strategy`: the result's StrategyInfo (`strategy_info` builds one); None: for an async/tiered point a strategy
    section with no per-checkpoint timings (`tier_fstype`: a tiered point's tier mount type), for sync none.
    """
    layout = nbytes is None
    nbytes = point.layout().total_bytes if nbytes is None else nbytes
    nominal = point.nominal_layout().total_bytes if layout else nbytes * 100
    read = restore_bytes(point.model, point.parallelism, point.checkpoint) if layout else nbytes
    cps = [_checkpoint(point, "write", i, g, nbytes, spread, writers, split, by_layout)
           for i, g in enumerate(write_gibps)]
    cps += [_checkpoint(point, "read", i, g, read, spread, writers, split, by_layout)
            for i, g in enumerate(read_gibps or [])]
    if resident is not None:
        for c in cps:
            if c["phase"] == "read":
                c["resident_pages_before"], c["pages_sampled"] = resident
    used = io_mode_used or point.io_mode
    opts = point.checkpoint
    cold = opts.cold_read if opts.cold_read != "auto" else ("fadvise" if used == "buffered" else "direct")
    summary = {ph: _phase_summary([c for c in cps if c["phase"] == ph]) for ph in ("write", "read")
               if any(c["phase"] == ph for c in cps)}
    hosts = [f"node{r // point.ranks_per_node}" for r in range(point.world_size)]
    return {
        "schema_version": 1, "study": study, "point_id": point.point_id, "attempt": attempt,
        "point": point.canonical(),
        "sizes": {"scale": point.checkpoint.scale, "nominal_checkpoint_bytes": nominal,
                  "written_checkpoint_bytes": nbytes, "files_per_checkpoint": 2 * point.world_size,
                  "bytes_per_rank_max": nbytes // point.world_size,
                  "bytes_per_rank_min": nbytes // point.world_size,
                  "read_bytes_per_restore": read},
        "io": {"io_mode_requested": point.io_mode, "io_mode_used": used,
               "direct_fallback_reason": None if used == point.io_mode else "O_DIRECT refused: EINVAL at open",
               "cold_read_method": cold, "restore_mode": opts.restore, "rank_shift": opts.rank_shift,
               "buffer_bytes": opts.buffer_mib << 20, "block_bytes": opts.block_mib << 20, "fsync_per_file": True,
               "subset_world_size": opts.subset_world_size},
        "checkpoints": cps, "summary": summary,
        "dlio": {"checkpoint_size_GB": nbytes / GIB,
                 "save_checkpoint_io_mean_GB_per_second": statistics.fmean(write_gibps)},
        "filesystem": {"name": point.filesystem, "path": f"/mnt/{point.filesystem}", "mount_point": "/mnt",
                       "fstype": fstype, "source": "/dev/sda1", "mount_options": mount_options,
                       "free_bytes_before": 10 * GIB, "free_bytes_after": 10 * GIB, "total_bytes": 100 * GIB},
        "provenance": {"hostnames": hosts, "node_names": sorted(set(hosts)), "simulated_nodes": simulated,
                       "world_size": point.world_size, "ranks_per_node": point.ranks_per_node,
                       "slurm": {"cluster": cluster} if cluster else None, "python_version": "3.11.2",
                       "mpi4py_version": "4.0.0", "mpi_library_version": "MPICH Version: 4.2.0",
                       "kernel": "6.1.0-test", "studyctl_version": "0.1.0",
                       "started_at": "2026-11-22T10:00:00+00:00", "finished_at": "2026-11-22T10:01:00+00:00"},
        "strategy": strategy if strategy is not None else _strategy(point, tier_fstype),
        "ceilings": ceilings,
    }


def _strategy(point: Point, tier_fstype: str | None) -> dict[str, Any] | None:
    opts = point.checkpoint
    if opts.strategy == "sync":
        return None
    tiered = opts.strategy == "tiered"
    return {"strategy": opts.strategy, "restore_mode": opts.restore, "step_s": opts.step_s,
                         "tier_path": "/tier" if tiered else None, "tier_fstype": tier_fstype if tiered else None,
                         "drain": opts.drain if tiered else None, "tier_keep": opts.tier_keep if tiered else None,
                         "replaced_nodes": opts.replaced_nodes}


def write_result(study_dir: Path, point: Point, write_gibps: list[float],
                 read_gibps: list[float] | None = None, attempt: int = 1, **kw: Any) -> Path:
    """Writes points/<id>/attempt-<n>/result.json; validated first, so no test feeds junk by mistake."""
    data = result_dict(point, write_gibps, read_gibps, attempt, study=study_dir.name, **kw)
    return _write(study_dir, point, data, attempt)


def _write(study_dir: Path, point: Point, data: dict[str, Any], attempt: int = 1) -> Path:
    text = json.dumps(data)
    Result.model_validate_json(text)
    path = study_dir / "points" / point.point_id / f"attempt-{attempt}" / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_error(study_dir: Path, point: Point, attempt: int, failure_class: str, reason: str) -> Path:
    path = study_dir / "points" / point.point_id / f"attempt-{attempt}" / "error.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "point_id": point.point_id, "attempt": attempt,
                                "failure_class": failure_class, "reason": reason}))
    return path


def scaling_study(study_dir: Path, reps: int = 3, nodes: tuple[int, ...] = (1, 2, 4),
                  filesystems: tuple[str, ...] = ("scratch",),
                  io_modes: tuple[str, ...] = ("buffered", "direct"),
                  zeros: tuple[int, ...] = (1, 3), models: tuple[str, ...] = ("gpt2-125m",),
                  writes: int = 3, reads: int = 3) -> list[Point]:
    """A plausible sweep: bandwidth grows sub-linearly with nodes, reps jitter deterministically."""
    made = []
    for mi, model in enumerate(models):
        for fi, fs in enumerate(filesystems):
            for io_mode in io_modes:
                for zero in zeros:
                    for n in nodes:
                        for rep in range(reps):
                            p = make_point(model, zero, n, 2, fs, io_mode, rep, writes, reads)
                            base = (2.0 + fi + 0.5 * mi) * (1.3 if io_mode == "direct" else 1.0) * (
                                1.1 if zero == 3 else 1.0) * n ** 0.8
                            jitter = 1 + 0.05 * math.sin(7 * rep + n + zero)
                            w = [base * jitter * (1 + 0.02 * i) for i in range(writes)]
                            r = [1.2 * base * jitter * (1 - 0.02 * i) for i in range(reads)]
                            write_result(study_dir, p, w, r)
                            made.append(p)
    return made


def axis_study(study_dir: Path, axis: str, values: tuple[Any, ...], reps: int = 3, nodes: tuple[int, ...] = (1, 2),
               speed: dict[Any, float] | None = None, **point_kw: Any) -> list[Point]:
    """Points that differ in one setting (a Point field or any checkpoint option), `reps` each, 1 and 2 nodes.

    Bandwidth = speed[value] × nodes (× a small repetition jitter), so ratios between values are known.
    """
    made = []
    for i, value in enumerate(values):
        factor = (speed or {}).get(value, 1.0 + i)
        for n in nodes:
            for rep in range(reps):
                kw = {**point_kw, "nodes": n, "rep": rep}
                kw[axis] = value
                p = make_point(**kw)
                jitter = 1 + 0.03 * math.sin(3 * rep + n)
                bw = [factor * n * jitter] * p.checkpoint.writes
                write_result(study_dir, p, bw, [2 * x for x in bw[: p.checkpoint.reads]])
                made.append(p)
    return made


def strategy_info(point: Point, blocking_s: float, background_s: float = 0.0, interference_s: float = 0.0,
                  restore: dict[str, float] | None = None, tier_fstype: str | None = None) -> dict[str, Any]:
    """A StrategyInfo for `point` (every write and restore alike): `restore` sets read fields (read_s, tier_bytes,
    shared_bytes, broadcast_s, broadcast_bytes); the bytes default to all read from shared storage."""
    opts = point.checkpoint
    nbytes = point.layout().total_bytes
    read = restore_bytes(point.model, point.parallelism, opts)
    writes = [{"phase": "write", "index": i, "blocking_s": blocking_s, "background_s": background_s,
               "background_bytes": nbytes if background_s else 0, "interference_s": interference_s}
              for i in range(opts.writes)]
    reads = [{"phase": "read", "index": i, "shared_bytes": read, "read_s": 0.0, **(restore or {})}
             for i in range(opts.reads)]
    tiered = opts.strategy == "tiered"
    return {"strategy": opts.strategy, "restore_mode": opts.restore, "step_s": opts.step_s,
            "tier_fstype": tier_fstype, "replaced_nodes": opts.replaced_nodes if tiered else 0,
            "checkpoints": writes + reads}


def ceiling_info(point: Point, write: float, read: float, even_write: float | None = None,
                 even_read: float | None = None, bcast: float | None = None, memcpy_per_rank: float = 8.0,
                 rounds: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """A CeilingInfo for `point`'s shape: storage ceilings as given (even ones default to the same); `rounds`: every
    round's rate per field, as the probe records them (None: none recorded, as in older results)."""
    largest, even = probe_bytes(point)
    return {"shape": shape_of(point).key, "largest_shard_bytes": largest, "even_bytes": even, "repeats": 3,
            "storage_write_GiBps": write,
            "storage_read_GiBps": read, "even_write_GiBps": even_write or write, "even_read_GiBps": even_read or read,
            "network_p2p_GiBps": bcast, "network_bcast_GiBps": bcast, "memcpy_GiBps_per_rank": memcpy_per_rank,
            "memcpy_GiBps": memcpy_per_rank * point.world_size, "rounds": rounds or {}}


def spread_rounds(rate: float, spread: float) -> list[float]:
    """Three rounds whose median is `rate`, ±`spread` of it apart (a probe's rounds on a noisy disk)."""
    return [rate * (1 - spread), rate, rate * (1 + spread)]


def write_ceiling(study_dir: Path, point: Point, write: float, read: float, streamed: int | None = None,
                  round_spread: float | None = None, **kw: Any) -> Point:
    """The ceiling point of `point`'s shape (role "ceiling", repetition 0) with a result carrying these ceilings;
    its checkpoints are the largest-shard probe's write and read, as a ceiling point's are, one per round, each rank
    streaming `streamed` bytes (None: its whole largest shard).

    `round_spread`: the storage probes' three rounds spread ±that share around the figure, recorded in `rounds`
    (every storage rate); None: every round at the figure and no `rounds` recorded (a result from before they
    were)."""
    ceiling = ceiling_of(point)
    info = ceiling_info(ceiling, write, read, **kw)
    per_phase = {phase: spread_rounds(rate, round_spread or 0.0) for phase, rate in (("write", write), ("read", read))}
    if round_spread is not None:
        info["rounds"] = {f: spread_rounds(info[f], round_spread) for f in
                          ("storage_write_GiBps", "storage_read_GiBps", "even_write_GiBps", "even_read_GiBps")}
    data = result_dict(ceiling, [write], [read], study=study_dir.name, ceilings=info)
    probe = (streamed or info["largest_shard_bytes"]) * ceiling.world_size  # every rank one file of its shard
    data["checkpoints"] = [_checkpoint(ceiling, phase, i, gibps, probe, 0.0)  # one per round of the probe
                           for phase, rates in per_phase.items() for i, gibps in enumerate(rates)]
    for c in data["checkpoints"]:  # one file per rank
        c["files"] = len(c["ranks"])
        for r in c["ranks"]:
            r["files"] = 1
    data["summary"] = {ph: _phase_summary([c for c in data["checkpoints"] if c["phase"] == ph])
                       for ph in ("write", "read")}
    _write(study_dir, ceiling, data)
    return ceiling


def recovery_timing(point: Point, launch_s: float, restore_s: float, ready_s: float) -> dict[str, Any]:
    """A RecoveryTiming of `point`'s restart as the plan has it (layouts, bytes and files the restart reads; each
    new rank its even share), with the phases' seconds given."""
    from studyctl.definition.checkpoint.recovery import restart_layout
    from studyctl.definition.checkpoint.reshard_counts import reshard_summary

    assert point.recovery is not None
    old, opts = point.parallelism, point.checkpoint
    new = restart_layout(point.model, old, point.recovery)
    plan = reshard_summary(point.model, old, new, opts.scale, opts.naming, opts.restore)
    files = round(plan.files_opened_mean * plan.ranks)

    def even(total: int) -> list[int]:
        return [total // new.ranks + (total % new.ranks if r == 0 else 0) for r in range(new.ranks)]

    return {"scenario": point.recovery.label(), "launcher": "mpiexec", "shared_clock": True,
            "step_dir": "global_epoch1_step1",
            **{f"{side}_{f}": getattr(par, a) for side, par in (("old", old), ("new", new))
               for f, a in (("world_size", "ranks"), ("tensor_parallel", "tensor"),
                            ("pipeline_parallel", "pipeline"), ("data_parallel", "data"))},
            "lost_nodes": point.recovery.lost_nodes, "launch_s": launch_s, "restore_s": restore_s,
            "read_s": restore_s, "ready_s": ready_s, "step_s": point.recovery.step.compute_s,
            "time_to_first_step_s": launch_s + restore_s + ready_s, "bytes_read": plan.total_bytes,
            "bytes_restored_per_rank": even(plan.total_bytes + plan.broadcast_bytes), "files_opened": files,
            "files_opened_per_rank": even(files), "broadcast_bytes": plan.broadcast_bytes}


def engine_info(data: dict[str, Any], storage_share: float | None) -> dict[str, Any]:
    """The engine section (EngineInfo) of a result `data` of an engine point: per checkpoint and restore the engine's
    call as long as its slowest rank and, with `storage_share`, that share of it inside storage calls (None: the
    engine wrote its paths itself, as DCP does)."""
    point = Point.model_validate(data["point"])
    opts = point.checkpoint
    timings = [{"phase": c["phase"], "index": c["index"], "bytes": c["bytes"], "files": c["files"],
                "engine_s": c["duration_max_s"],
                "storage_s": None if storage_share is None else c["duration_max_s"] * storage_share}
               for c in data["checkpoints"]]
    return {"engine": opts.engine, "device": opts.device, "on_gpu": False, "state": opts.state,
            "replicated_writer": opts.replicated_writer, "torch_version": "2.13.0", "tensors_per_rank_max": 4,
            "tensor_bytes_per_rank_max": data["sizes"]["bytes_per_rank_max"], "checkpoints": timings}


def write_engine_result(study_dir: Path, point: Point, write_gibps: list[float], read_gibps: list[float],
                        storage_share: float | None) -> Path:
    """`write_result` for an engine point, with its engine section (`engine_info`)."""
    data = result_dict(point, write_gibps, read_gibps, study=study_dir.name)
    return _write(study_dir, point, {**data, "engine": engine_info(data, storage_share)})
