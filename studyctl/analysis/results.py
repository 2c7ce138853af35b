"""A study's result files → plain rows: find each point's attempts, validate against `Result`, cache.

Parsed files are cached by path, size and mtime (plain JSON under tables/.cache, `result_cache`), so
re-collecting validates only what changed. Nothing here writes outside the cache or deletes anything.
Only regular files are opened: a FIFO or device named result.json is skipped with a reason (opening it
could block or act on a device), a dangling symlink is an unusable file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from studyctl.analysis.cells import cell_key, point_settings
from studyctl.analysis.plausibility import implausible
from studyctl.analysis.result_cache import ParseCache
from studyctl.analysis.training_cost import strategy_rows
from studyctl.attempt.paths import StudyPaths, attempt_number
from studyctl.definition.names import name_problem
from worker.result import CheckpointTiming, Result, WorkerError
from worker.timing import mlperf_throughput_GiBps

RANK_FIELDS = ("phase", "index", "rank", "host", "bytes", "duration_s", "bandwidth_GiBps")
RANK_CONTEXT = ("point_id", "cell_key", "model", "zero_stage", "nodes", "filesystem", "io_mode", "repetition")


@dataclass
class Problem:
    """A result file that could not be used (or a result that should exist and does not)."""

    point_id: str
    attempt: int | None
    path: str
    reason: str


@dataclass
class Failure:
    """A worker error record (error.json) on the point's latest attempt with no usable result."""

    point_id: str
    attempt: int
    failure_class: str
    reason: str


@dataclass
class AttemptFiles:
    attempt: int
    result: Path | None
    error: Path | None


@dataclass
class LoadedRows:
    rows: list[dict[str, Any]]  # per point: {"checkpoints": [...], "ranks": [...], "info": {...}}
    problems: list[Problem]
    failures: list[Failure]
    files_read: int
    files_cached: int


def find_attempts(paths: StudyPaths) -> dict[str, list[AttemptFiles]]:
    """point_id → its attempts (newest first) that left a result.json or error.json."""
    found: dict[str, list[AttemptFiles]] = {}
    try:
        point_ids = [e.name for e in os.scandir(paths.points) if e.is_dir()]
    except OSError:
        return found
    for point_id in point_ids:
        attempts = []
        for entry in os.scandir(paths.point(point_id)):
            number = attempt_number(entry.name)
            if number is None or not entry.is_dir():
                continue
            files = paths.attempt(point_id, number)
            names = set(os.listdir(entry.path))
            result = files.result if files.result.name in names else None
            error = files.error if files.error.name in names else None
            if result or error:
                attempts.append(AttemptFiles(number, result, error))
        if attempts:
            found[point_id] = sorted(attempts, key=lambda a: a.attempt, reverse=True)
    return found


def _checkpoint_row(c: CheckpointTiming) -> dict[str, Any]:
    return {"phase": c.phase, "index": c.index, "bytes": c.bytes, "files": c.files,
            "duration_s": c.duration_max_s, "span_s": c.span_s, "aggregate_GiBps": c.aggregate_GiBps,
            "mlperf_throughput_GiBps": mlperf_throughput_GiBps(c),
            "rank_bandwidth_min_GiBps": c.rank_bandwidth_min_GiBps,
            "rank_bandwidth_max_GiBps": c.rank_bandwidth_max_GiBps,
            "active_ranks": sum(1 for rk in c.ranks if rk.bytes)}


def _info(r: Result, path: Path) -> dict[str, Any]:
    prov, fs = r.provenance, r.filesystem
    return {"point_id": r.point_id, "attempt": r.attempt, "path": str(path), "started_at": prov.started_at,
            "finished_at": prov.finished_at, "python": prov.python_version, "mpi4py": prov.mpi4py_version,
            "mpi_library": prov.mpi_library_version, "kernel": prov.kernel, "studyctl": prov.studyctl_version,
            "cluster": prov.slurm.cluster if prov.slurm else None,
            "partition": prov.slurm.partition if prov.slurm else None,
            "node_names": ",".join(prov.node_names), "simulated_nodes": prov.simulated_nodes,
            "filesystem": fs.name, "fs_path": fs.path, "fstype": fs.fstype, "mount_point": fs.mount_point,
            "mount_options": fs.mount_options, "fs_source": fs.source, "fs_total_bytes": fs.total_bytes,
            "direct_fallback_reason": r.io.direct_fallback_reason}


def _rows_from_result(r: Result, path: Path) -> dict[str, Any]:
    """Everything the tables need from one result, as plain lists of dicts (plain data: cached as JSON)."""
    p = r.point
    base: dict[str, Any] = {"tool": "studyctl", "study": r.study, "point_id": r.point_id, "attempt": r.attempt,
                            **point_settings(p), "io_mode_used": r.io.io_mode_used,
                            "cold_read_method": r.io.cold_read_method}
    base["cell_key"] = cell_key(base)
    base.update(repetition=p.repetition, world_size=p.world_size, data_parallel=p.data_parallel,
                nominal_checkpoint_bytes=r.sizes.nominal_checkpoint_bytes,
                written_checkpoint_bytes=r.sizes.written_checkpoint_bytes,
                simulated_nodes=r.provenance.simulated_nodes, fstype=r.filesystem.fstype)
    checkpoints, ranks = [], []
    for c in r.checkpoints:
        checkpoints.append({**base, **_checkpoint_row(c)})
        ranks += [(c.phase, c.index, rk.rank, rk.host, rk.bytes, rk.duration_s, rk.bandwidth_GiBps)
                  for rk in c.ranks if rk.bytes]
    return {"checkpoints": checkpoints, "ranks": ranks, "info": _info(r, path), "training": strategy_rows(r, base)}


def _describe_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    err = errors[0]
    if err["type"] == "json_invalid":
        return f"not valid JSON (truncated or corrupt): {err['msg']}"
    where = ".".join(str(x) for x in err["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"does not match the result schema: {where}: {err['msg']}{more}"


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def file_status(path: Path) -> tuple[os.stat_result | None, str | None]:
    """(stat, None) for a regular file (or a symlink to one); (None, reason) for anything else, never opened."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        target = os.readlink(path) if path.is_symlink() else "?"
        return None, f"dangling symlink (to {target}): unusable"
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "something else")
        return None, f"{kind}, not a regular file: skipped, never opened"
    return st, None


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file; OSError for anything else (non-blocking open, checked on the descriptor,
    so a file swapped for a FIFO after `file_status` cannot block us)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def bad_names(result: Result) -> str | None:
    """Names a result brings (they name plots and table keys) held to the sweep file's rule, or why not."""
    return name_problem({"study": result.study, "model": result.point.model.name,
                         "filesystem": result.point.filesystem})


def parse_result(path: Path, point_id: str) -> tuple[dict[str, Any] | None, str | None]:
    """(rows, None) for a valid, plausible result of this point, else (None, one-line reason)."""
    try:
        text = read_regular(path)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if not text.strip():
        return None, "empty file"
    try:
        result = Result.model_validate_json(text)
    except ValidationError as exc:
        return None, _describe_error(exc)
    if result.point_id != point_id:
        return None, f"holds point {result.point_id}, not {point_id}"
    if result.point.point_id != point_id:
        return None, f"its point configuration hashes to {result.point.point_id}, not {point_id}"
    bad_name = bad_names(result)
    if bad_name:
        return None, bad_name
    problem = implausible(result)
    if problem:
        return None, f"implausible figures: {problem}"
    return _rows_from_result(result, path), None


def parse_error(path: Path) -> tuple[str, str]:
    """(failure class, reason) from a worker error record; tolerant, since it only explains a failure."""
    try:
        err = WorkerError.model_validate_json(read_regular(path))
        return err.failure_class, err.reason
    except (OSError, ValidationError) as exc:
        return "unknown", f"error.json unreadable or invalid ({type(exc).__name__})"


def _one_result(cache: ParseCache, out: LoadedRows, point_id: str, attempt: int, path: Path) -> bool:
    """True when this attempt's result is usable (its rows added); else a problem is recorded."""
    st, error = file_status(path)
    rows = None
    if st is not None:
        rows, error = cache.get_or_parse(path, st, parse_result, point_id)
    if rows is not None:
        out.rows.append(rows)
        return True
    out.problems.append(Problem(point_id, attempt, str(path), error or "invalid"))
    return False


def load_rows(paths: StudyPaths, cache_dir: Path | None = None) -> LoadedRows:
    """Per point the newest attempt with a valid result; problems for newer invalid ones; failures."""
    cache_path = paths.results_cache if cache_dir is None else cache_dir / paths.results_cache.name
    cache = ParseCache(cache_path, paths.root)
    out = LoadedRows([], [], [], 0, 0)
    for point_id, attempts in sorted(find_attempts(paths).items()):
        if any(_one_result(cache, out, point_id, a.attempt, a.result) for a in attempts if a.result is not None):
            continue
        latest = attempts[0]
        if latest.error is not None:
            st, why = file_status(latest.error)
            cls, reason = cache.get_or_parse(latest.error, st, parse_error) if st else ("unknown", f"error.json: {why}")
            out.failures.append(Failure(point_id, latest.attempt, cls, reason))
    cache.save()
    out.files_read, out.files_cached = cache.misses, cache.hits
    return out
