"""A study's result files → plain rows: each point's newest usable result (`attempt.result_file`), cached.

Files are found and opened by `attempt.tree` (one symlink rule, regular files only) and read by
`attempt.result_file` (schema, identity, plausibility, names); points the sweep copy excludes are left out
(`attempt.judged`). Parsed files are cached by path, size and mtime (plain JSON under tables/.cache,
`result_cache`), so re-collecting validates only what changed. Nothing here writes outside the cache.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from studyctl.analysis.cache_values import Split
from studyctl.analysis.cells import cell_key
from studyctl.analysis.columns import REQUEST_KINDS, RESIDENCY_COLUMNS
from studyctl.analysis.findings import Failure, Problem
from studyctl.analysis.hardware.rank_load import SPLIT_FIELDS, ceiling_row, heaviest_rank, rank_split
from studyctl.analysis.labels import point_settings
from studyctl.analysis.recovery.rows import recovery_row
from studyctl.analysis.result_cache import ParseCache
from studyctl.analysis.training.rows import nominal_restore, point_cost_row
from studyctl.attempt.judged import Judged
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.result_file import read_error, read_result
from studyctl.attempt.tree import AttemptFiles, file_status, scan_attempts
from studyctl.definition.checkpoint.configuration import ByConfiguration
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.planning.fit_group import STUDYCTL_TOOL
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.result.result_schema import CheckpointTiming, Result, mlperf_throughput_GiBps

ALL_JUDGED = Judged()  # no sweep copy to judge by
RANK_FIELDS = ("phase", "index", "rank", "host", "bytes", "duration_s", "bandwidth_GiBps", "files", *SPLIT_FIELDS)
# A rank with no split recorded (older results) keeps null in the parsed rows, not NaN: the parse cache then holds no
# NaN and is read by orjson, not json (three times slower); the ranks table makes them NaN again.
NO_SPLIT = (None,) * len(SPLIT_FIELDS)
NO_RANKS = {"rank_count": 0, "ranks_json": "[]"}  # a point whose ranks are no rows of the ranks table
RANK_CONTEXT = ("point_id", "cell_key", "model", "zero_stage", "nodes", "filesystem", "io_mode", "repetition")


JSON_WRITTEN = " "  # leads the text `ranks_text` wrote by json (orjson's text never starts with a space)


def ranks_text(ranks: Sequence[Sequence[Any]]) -> str:
    """A point's rank rows (RANK_FIELDS each) as JSON text: the parse cache keeps them as one string, which its
    JSON reader copies instead of parsing a dozen numbers a rank (three fifths of loading the cache at 10,000
    points); they are parsed only where a frame is built from them (`rank_rows`). orjson where that is exact:
    it writes NaN and ±inf as null, so its text must hold no more nulls than the rows hold None (a string
    holding "null" only sends the rows to json); json otherwise, and for integers beyond 64 bits (which orjson
    would read back as floats: json's text is marked, and read by json)."""
    try:
        text = orjson.dumps(ranks).decode()
        if text.count("null") == sum(r.count(None) for r in ranks):
            return text
    except TypeError:
        pass
    return JSON_WRITTEN + json.dumps(ranks, separators=(",", ":"))


def rank_rows(row: dict[str, Any]) -> list[list[Any]]:
    """The rank rows `ranks_text` wrote, as lists (what the parse cache gave before it kept them as text)."""
    text = row["ranks_json"]
    return json.loads(text) if text.startswith(JSON_WRITTEN) else orjson.loads(text)


# A point's bulky rows: the parse cache keeps them apart, read only for the points whose frame rows are built
# (`LoadedRows.complete`); every other table takes the rest of the point's rows.
BULKY = ("checkpoints", "ranks_json")


def _parts(value: Any) -> tuple[Any, Any]:
    """A parsed result's (light part, bulky rows); anything else (a refusal, an error record) is all light."""
    rows = value[0] if isinstance(value, (list, tuple)) and len(value) == 2 else None
    if not isinstance(rows, dict) or any(k not in rows for k in BULKY):
        return value, None
    return [{k: v for k, v in rows.items() if k not in BULKY}, value[1]], {k: rows[k] for k in BULKY}


def _join(light: Any, bulky: Any) -> None:
    light[0].update(bulky)


ROWS_SPLIT = Split(_parts, _join)


@dataclass
class LoadedRows:
    # per point: {"checkpoints": [...], "checkpoint_count": n, "rank_count": n, "ranks_json": text, "info": {...},
    # ...}; a point read from the parse cache lacks its bulky rows (BULKY) until `complete` is asked for them
    rows: list[dict[str, Any]]
    problems: list[Problem]
    failures: list[Failure]
    files_read: int
    files_cached: int
    left_out: list[str] = field(default_factory=list)  # points not judged (excluded) that left a result file
    # per row, its result file as the parse cache keys it (relative path, mtime_ns, size): the kept per-point frames
    # (`frame_cache`) reuse a point's rows while its stamp is the same
    stamps: list[tuple[str, int, int]] = field(default_factory=list)
    cache: ParseCache | None = None

    def complete(self, indices: Sequence[int]) -> None:
        """These rows given their bulky rows (in place); a cache shard repaired on the way is saved."""
        if self.cache is not None:
            self.cache.complete(self.stamps[i][0] for i in indices)
            self.cache.save()


# One column per request kind (`columns.REQUEST_KINDS`), and the slowest rank's time to first byte.
REQUEST_COLUMNS = (*(f"requests_{k}" for k in REQUEST_KINDS), "first_byte_s_max")


def request_columns(c: CheckpointTiming) -> dict[str, Any]:
    got = [rk.requests for rk in c.ranks if rk.requests is not None]
    if not got:
        return {}
    firsts = [r.first_byte_s for r in got if r.first_byte_s is not None]
    return {**{f"requests_{k}": sum(getattr(r, k) for r in got) for k in REQUEST_KINDS},
            "first_byte_s_max": max(firsts) if firsts else None}


def _checkpoint_row(c: CheckpointTiming) -> dict[str, Any]:
    return {**request_columns(c), **{k: getattr(c, k) for k in RESIDENCY_COLUMNS},
            "phase": c.phase, "index": c.index, "bytes": c.bytes, "files": c.files,
            "duration_s": c.duration_max_s, "span_s": c.span_s, "aggregate_GiBps": c.aggregate_GiBps,
            "mlperf_throughput_GiBps": mlperf_throughput_GiBps(c),
            "rank_bandwidth_min_GiBps": c.rank_bandwidth_min_GiBps,
            "rank_bandwidth_max_GiBps": c.rank_bandwidth_max_GiBps,
            "active_ranks": sum(1 for rk in c.ranks if rk.bytes)}


def _info(r: Result, path: Path) -> dict[str, Any]:
    prov, fs = r.provenance, r.filesystem
    return {"point_id": r.point_id, "attempt": r.attempt, "role": r.point.role, "shape": shape_of(r.point).key,
            "path": str(path),
            "started_at": prov.started_at, "finished_at": prov.finished_at, "python": prov.python_version,
            "mpi4py": prov.mpi4py_version, "mpi_library": prov.mpi_library_version, "kernel": prov.kernel,
            "studyctl": prov.studyctl_version,
            "cluster": prov.slurm.cluster if prov.slurm else None,
            "partition": prov.slurm.partition if prov.slurm else None,
            "node_names": ",".join(prov.node_names), "simulated_nodes": prov.simulated_nodes,
            "filesystem": fs.name, "fs_path": fs.path, "fstype": fs.fstype, "mount_point": fs.mount_point,
            "mount_options": fs.mount_options, "fs_source": fs.source, "fs_total_bytes": fs.total_bytes,
            "direct_fallback_reason": r.io.direct_fallback_reason, "memory_return": prov.memory_return}


@dataclass
class _ConfigFacts:
    """What rows take from a point's configuration alone (its repetitions share it)."""

    settings: dict[str, Any]  # point_settings
    heaviest: dict[str, str | None]  # heaviest_rank for a measure point, else {}
    restore: dict[str, int]  # nominal_restore
    cells: dict[tuple[Any, ...], str] = field(default_factory=dict)  # (io_mode_used, cold_read_method) → cell_key


def _facts(p: Point) -> _ConfigFacts:
    return _ConfigFacts(point_settings(p), heaviest_rank(p) if p.role == "measure" else {}, nominal_restore(p))


# Worked out once per configuration, not once per result (most of turning 10,000 results into rows).
_config_facts = ByConfiguration(_facts)


def _rows_from_result(r: Result, path: Path) -> dict[str, Any]:
    """Everything the tables need from one result, as plain lists of dicts (plain data: cached as JSON)."""
    p = r.point
    facts = _config_facts(p)
    base: dict[str, Any] = {"tool": STUDYCTL_TOOL, "study": r.study, "point_id": r.point_id, "attempt": r.attempt,
                            **facts.settings, "io_mode_used": r.io.io_mode_used,
                            "cold_read_method": r.io.cold_read_method}
    measured = (r.io.io_mode_used, r.io.cold_read_method)  # the cell's identity beyond the settings (`MEASURED`)
    cell = facts.cells.get(measured)
    if cell is None:
        cell = facts.cells[measured] = cell_key(base)
    base["cell_key"] = cell
    base.update(repetition=p.repetition, world_size=p.world_size, data_parallel=p.data_parallel,
                **facts.heaviest,
                nominal_checkpoint_bytes=r.sizes.nominal_checkpoint_bytes,
                written_checkpoint_bytes=r.sizes.written_checkpoint_bytes,
                simulated_nodes=r.provenance.simulated_nodes, fstype=r.filesystem.fstype,
                tier_fstype=r.strategy.tier_fstype if r.strategy else None, **facts.restore)
    checkpoints, ranks = [], []
    for c in r.checkpoints:
        checkpoints.append({**base, **_checkpoint_row(c)})
        ranks += [(c.phase, c.index, rk.rank, rk.host, rk.bytes, rk.duration_s, rk.bandwidth_GiBps, rk.files,
                   *(NO_SPLIT if rk.split is None else rank_split(rk))) for rk in c.ranks if rk.bytes]
    rows = {"checkpoints": checkpoints, "checkpoint_count": len(checkpoints), "rank_count": len(ranks),
            "ranks_json": ranks_text(ranks), "info": _info(r, path), "training": None}
    if p.role == "ceiling":  # a property of the shape, never a cell: its own table, joined to cells by shape
        return {**rows, "checkpoints": [], "checkpoint_count": 0, **NO_RANKS, "ceiling": ceiling_row(r)}
    if p.role != "measure":  # calibration: the projections' fit reads its checkpoints (by role); never a cell
        return {**rows, **NO_RANKS}
    return {**rows, "training": point_cost_row(r, base), "recovery": recovery_row(r, base)}


def parse_result(path: Path, point_id: str, attempt: int) -> tuple[dict[str, Any] | None, str | None]:
    """(rows, None) for a usable result of this attempt, else (None, one-line reason): what the cache keeps."""
    result, reason = read_result(path, point_id, attempt)
    return (_rows_from_result(result, path), None) if result is not None else (None, reason)


def _one_result(paths: StudyPaths, cache: ParseCache, out: LoadedRows, a: AttemptFiles, path: Path) -> bool:
    """True when this attempt's result (`path`) is usable (its rows added); else a problem is recorded."""
    st, error = file_status(path, paths, scanned=a.result_lstat)  # `path` is a.result
    rows = None
    if st is not None:
        rows, error = cache.get_or_parse(path, st, parse_result, a.point_id, a.attempt)
    if rows is not None and st is not None:
        out.rows.append(rows)
        out.stamps.append((cache.key(path), st.st_mtime_ns, st.st_size))
        return True
    out.problems.append(Problem(a.point_id, a.attempt, str(path), error or "invalid"))
    return False


def _failure(paths: StudyPaths, cache: ParseCache, latest: AttemptFiles, path: Path) -> Failure:
    st, why = file_status(path, paths)
    cls, reason = cache.get_or_parse(path, st, read_error) if st else ("unknown", f"error.json: {why}")
    return Failure(latest.point_id, latest.attempt, cls, reason)


def _newest_results(paths: StudyPaths, found: dict[str, list[AttemptFiles]], excluded: frozenset[str]
                    ) -> list[tuple[Path, Any, tuple[str, int]]]:
    """(path, stat, (point, attempt)) of each point's newest result file that is a regular file: what
    `load_rows` reads first (an unusable one sends it to an older attempt, read then)."""
    jobs = []
    for point_id, attempts in found.items():
        newest = next((a for a in attempts if a.result is not None), None)
        if point_id in excluded or newest is None or newest.result is None:
            continue
        st, _ = file_status(newest.result, paths, scanned=newest.result_lstat)
        if st is not None:
            jobs.append((newest.result, st, (point_id, newest.attempt)))
    return jobs


def load_rows(paths: StudyPaths, cache_dir: Path | None = None, excluded: frozenset[str] = frozenset(),
              found: dict[str, list[AttemptFiles]] | None = None, judged: Judged = ALL_JUDGED) -> LoadedRows:
    """Per point the newest attempt with a usable result; problems for newer unusable ones; failures.

    `excluded` and `judged`: points not judged (`attempt.judged`: excluded, or added for a shape no longer
    measured): their results are named in `left_out`, nothing else. `found`: the tree as `scan_attempts` found
    it, when the caller has scanned it already."""
    cache_path = paths.results_cache if cache_dir is None else cache_dir / paths.results_cache.name
    cache = ParseCache(cache_path, paths.root, ROWS_SPLIT)
    out = LoadedRows([], [], [], 0, 0, cache=cache)
    found = scan_attempts(paths) if found is None else found
    cache.parse_ahead(_newest_results(paths, found, excluded), parse_result)
    for point_id, attempts in sorted(found.items()):
        if point_id in excluded:
            if any(a.result is not None for a in attempts):
                out.left_out.append(point_id)
            continue
        if any(_one_result(paths, cache, out, a, a.result) for a in attempts if a.result is not None):
            info = out.rows[-1]["info"]
            if info["role"] != "measure" and not judged.added_judged(info["shape"]):
                out.rows.pop()
                out.stamps.pop()
                out.left_out.append(point_id)
            continue
        if attempts[0].error is not None:
            out.failures.append(_failure(paths, cache, attempts[0], attempts[0].error))
    cache.save()
    out.files_read, out.files_cached = cache.misses, cache.hits
    return out
