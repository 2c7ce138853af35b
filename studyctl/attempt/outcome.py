"""What an attempt directory says about how the attempt ended (worker files are the truth)."""

from __future__ import annotations

import json
from pathlib import Path

from studyctl.attempt.records import Update
from studyctl.states import FailureClass, State

RESULT = "result.json"
ERROR = "error.json"
STDERR = "stderr.log"
STDOUT = "stdout.log"


def read_outcome(attempt_dir: Path, point_id: str, attempt: int) -> Update | None:
    """COMPLETED if a parseable result exists, FAILED with the worker's reason if an error record does."""
    result = attempt_dir / RESULT
    if result.is_file():
        try:
            data = json.loads(result.read_text())
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("point_id") == point_id:
            prov = data.get("provenance") or {}
            nodes = prov.get("node_names") or []
            return Update(point_id, attempt, State.COMPLETED, node_list=",".join(nodes) or None,
                          ended_at=result.stat().st_mtime)
    error = attempt_dir / ERROR
    if error.is_file():
        try:
            data = json.loads(error.read_text())
            failure = FailureClass(data.get("failure_class", FailureClass.WORKER_CRASH.value))
            reason = str(data.get("reason") or "worker reported a failure without a reason")
        except (OSError, ValueError):
            failure, reason = FailureClass.WORKER_CRASH, "unreadable error.json"
        return Update(point_id, attempt, State.FAILED, failure, reason, ended_at=error.stat().st_mtime)
    return None


def stderr_tail(attempt_dir: Path, lines: int = 6, limit: int = 600) -> str | None:
    """The last meaningful stderr lines, folded to one line for the ledger."""
    path = attempt_dir / STDERR
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    folded = " | ".join(kept)
    return folded[-limit:] or None
