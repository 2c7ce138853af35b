"""What an attempt directory says about how the attempt ended (worker files are the truth)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from studyctl.attempt.paths import AttemptPaths, StudyPaths
from studyctl.attempt.records import Update
from studyctl.attempt.tree import file_status, read_regular
from studyctl.definition.result.result_schema import RECORD_REFUSED_EXIT
from studyctl.states import FailureClass, State
from studyctl.units import KIB, format_bytes

RECORD_ROOM = 64 * KIB  # what a worker's error record needs, with the temporary file of its atomic write


def _json_of(path: Path, study: StudyPaths) -> Any:
    """The file's JSON through the one opener (`attempt.tree`: inside the study, regular, bounded); None if not."""
    if file_status(path, study)[0] is None:
        return None
    try:
        return json.loads(read_regular(path))
    except (OSError, ValueError, RecursionError):
        return None


def read_outcome(paths: AttemptPaths, point_id: str, attempt: int) -> Update | None:
    """COMPLETED if a parseable result of this point exists, FAILED with the worker's reason if an error record does.

    The files are found and opened as collect opens them (`attempt.tree`); whether a result's figures are
    usable is collect's question (`attempt.result_file`): the ledger records that the worker finished."""
    study = StudyPaths(paths.dir.parent.parent.parent)  # points/<id>/attempt-<n>
    data = _json_of(paths.result, study)
    if isinstance(data, dict) and data.get("point_id") == point_id:
        prov = data.get("provenance")
        nodes = prov.get("node_names") if isinstance(prov, dict) else None
        node_list = ",".join(n for n in nodes if isinstance(n, str)) if isinstance(nodes, list) else ""
        return Update(point_id, attempt, State.COMPLETED, node_list=node_list or None,
                      ended_at=paths.result.stat().st_mtime)
    if os.path.lexists(paths.error):
        data = _json_of(paths.error, study)
        try:
            failure = FailureClass(data.get("failure_class", FailureClass.WORKER_CRASH.value))
            reason = str(data.get("reason") or "worker reported a failure without a reason")
        except (AttributeError, ValueError):
            failure, reason = FailureClass.WORKER_CRASH, "unreadable error.json"
        return Update(point_id, attempt, State.FAILED, failure, reason, ended_at=_mtime(paths.error))
    return None


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def stderr_tail(paths: AttemptPaths, lines: int = 6, limit: int = 600) -> str | None:
    """The last meaningful stderr lines, folded to one line for the ledger."""
    try:
        with paths.stderr.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    folded = " | ".join(kept)
    return folded[-limit:] or None


def results_full(paths: AttemptPaths, exit_code: int | None) -> str | None:
    """Why a worker left neither result nor error record, where the reason is the results filesystem: the
    worker's exit code says it was refused (full, or over quota), or the filesystem has no room for a record
    now (mpiexec ORs its ranks' exit codes, so the code alone can be lost). None otherwise."""
    try:
        st = os.statvfs(paths.dir)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    full = free < RECORD_ROOM or (st.f_files > 0 and st.f_favail == 0)  # f_files 0: no inode count reported
    if full:
        return (f"the results disk is full: {paths.dir} has {format_bytes(free)} free, no room for the worker's "
                "result or error record; results already written are kept; free space, then resubmit")
    if exit_code == RECORD_REFUSED_EXIT:
        return (f"the results filesystem refused the worker's error record in {paths.dir} (full or over quota); "
                "results already written are kept; free space, then resubmit")
    return None
