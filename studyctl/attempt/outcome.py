"""What an attempt directory says about how the attempt ended (worker files are the truth)."""

from __future__ import annotations

import json

from studyctl.attempt.paths import AttemptPaths
from studyctl.attempt.records import Update
from studyctl.states import FailureClass, State


def read_outcome(paths: AttemptPaths, point_id: str, attempt: int) -> Update | None:
    """COMPLETED if a parseable result exists, FAILED with the worker's reason if an error record does."""
    if paths.result.is_file():
        try:
            data = json.loads(paths.result.read_text())
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("point_id") == point_id:
            prov = data.get("provenance") or {}
            nodes = prov.get("node_names") or []
            return Update(point_id, attempt, State.COMPLETED, node_list=",".join(nodes) or None,
                          ended_at=paths.result.stat().st_mtime)
    if paths.error.is_file():
        try:
            data = json.loads(paths.error.read_text())
            failure = FailureClass(data.get("failure_class", FailureClass.WORKER_CRASH.value))
            reason = str(data.get("reason") or "worker reported a failure without a reason")
        except (OSError, ValueError):
            failure, reason = FailureClass.WORKER_CRASH, "unreadable error.json"
        return Update(point_id, attempt, State.FAILED, failure, reason, ended_at=paths.error.stat().st_mtime)
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
