"""Slurm's accounting view of jobs: the job-id grammar, sacct's states in ours, and one batched query.

Job ids: "123" (a plain job), "123_4" (an array element) and "123_[5-9%2]" (pending elements that
sacct and squeue fold into one line). A study of 1,000 points has a handful of arrays, so one
`sacct -j <arrays>` per refresh covers everything; a short cache keeps a polling loop from
hammering slurmdbd (submitit does the same with its one watcher).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from studyctl.states import FailureClass, State

FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "Start", "End", "Reason")
MIN_INTERVAL_S = 2.0

SLURM_STATES: dict[str, State] = {
    "PENDING": State.PENDING, "REQUEUED": State.PENDING, "REQUEUE_FED": State.PENDING,
    "REQUEUE_HOLD": State.PENDING, "RESIZING": State.PENDING, "SUSPENDED": State.PENDING,
    "CONFIGURING": State.RUNNING, "RUNNING": State.RUNNING, "COMPLETING": State.RUNNING,
    "STAGE_OUT": State.RUNNING, "SIGNALING": State.RUNNING, "STOPPED": State.RUNNING,
    "COMPLETED": State.COMPLETED, "FAILED": State.FAILED, "BOOT_FAIL": State.NODE_FAIL,
    "DEADLINE": State.TIMEOUT, "TIMEOUT": State.TIMEOUT, "CANCELLED": State.CANCELLED,
    "REVOKED": State.CANCELLED, "NODE_FAIL": State.NODE_FAIL, "PREEMPTED": State.PREEMPTED,
    "OUT_OF_MEMORY": State.OUT_OF_MEMORY, "SPECIAL_EXIT": State.FAILED,
}
FAILURE_OF: dict[State, FailureClass] = {
    State.TIMEOUT: FailureClass.TIMEOUT, State.CANCELLED: FailureClass.CANCELLED,
    State.NODE_FAIL: FailureClass.SCHEDULER, State.PREEMPTED: FailureClass.SCHEDULER,
    State.OUT_OF_MEMORY: FailureClass.WORKER_CRASH, State.FAILED: FailureClass.WORKER_CRASH,
}

_FOLDED = re.compile(r"(\d+)_\[([^\]]+)\]")


def expand_job_ids(text: str) -> list[str]:
    """'12_[3-5,7%2]' → ['12_3', '12_4', '12_5', '12_7']; plain ids pass through."""
    m = _FOLDED.fullmatch(text.strip())
    if not m:
        return [text.strip()]
    out = []
    for part in m.group(2).split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        out += [f"{m.group(1)}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def array_of(job_id: str) -> str:
    """'123_4' → '123': what `sacct -j` and `scancel` take for a whole array."""
    return job_id.split("_", 1)[0]


def index_of(job_id: str) -> int | None:
    """'123_4' → 4; a plain job has no index."""
    _, _, index = job_id.partition("_")
    return int(index) if index.isdigit() else None


def _epoch(text: str) -> float | None:
    """sacct times: epoch seconds (we ask for SLURM_TIME_FORMAT=%s) or ISO local time; 'Unknown' → None."""
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class SacctRow:
    """One job (or array element) as accounting sees it."""

    job_id: str
    name: str
    slurm_state: str  # first word: "CANCELLED by 0" → "CANCELLED"
    state_text: str  # the whole State column
    exit_code: int | None
    node_list: str | None  # Slurm's hostlist, e.g. "n[1-2]"
    start: float | None
    end: float | None
    reason: str | None
    requeues: int = 0  # earlier records of the same job id (`sacct -D`): times Slurm requeued it

    @property
    def state(self) -> State:
        # An unknown word from a newer Slurm is not a reason to keep waiting forever.
        return SLURM_STATES.get(self.slurm_state, State.FAILED)


def parse_sacct(text: str) -> dict[str, SacctRow]:
    """`sacct -X -D -P -n -o <FIELDS>` output → rows by job id, folded array lines expanded.

    A folded line ("12_[0-1%1]", the array's not-yet-started rest) can still list an element that
    has its own line already (slurmdbd lags): the element's own line wins. With -D a requeued job
    has one line per run, oldest first: the last is its state, the others count as requeues.
    """
    rows: dict[str, SacctRow] = {}
    own_lines: dict[str, int] = {}
    for line in text.splitlines():
        values = line.split("|")
        if len(values) != len(FIELDS):
            continue
        raw = dict(zip(FIELDS, values, strict=True))
        code = raw["ExitCode"].split(":")[0]
        nodes = raw["NodeList"].strip()
        reason = raw["Reason"].strip()
        ids = expand_job_ids(raw["JobID"])
        is_folded = ids != [raw["JobID"].strip()]
        for jid in ids:
            if is_folded and jid in rows:
                continue  # an element's own line is never replaced by a folded one
            if not is_folded:
                own_lines[jid] = own_lines.get(jid, 0) + 1
            rows[jid] = SacctRow(
                job_id=jid, name=raw["JobName"], slurm_state=(raw["State"].split() or ["UNKNOWN"])[0],
                state_text=raw["State"].strip(), exit_code=int(code) if code.isdigit() else None,
                node_list=nodes if nodes and nodes != "None assigned" else None,
                start=_epoch(raw["Start"]), end=_epoch(raw["End"]),
                reason=reason if reason and reason != "None" else None,
                requeues=max(0, own_lines.get(jid, 0) - 1))
    return rows


Runner = Callable[..., subprocess.CompletedProcess[str]]


class SacctWatcher:
    """One `sacct` call per refresh for every job asked about; answers reused for `min_interval_s`."""

    def __init__(self, min_interval_s: float = MIN_INTERVAL_S, runner: Runner = subprocess.run) -> None:
        self.min_interval_s = min_interval_s
        self.runner = runner
        self.calls = 0
        self.error: str | None = None  # the last failure, for a status note; rows then stay unknown
        self._at = -1e9
        self._arrays: frozenset[str] = frozenset()
        self._rows: dict[str, SacctRow] = {}

    def rows(self, job_ids: Iterable[str]) -> dict[str, SacctRow]:
        arrays = frozenset(array_of(j) for j in job_ids)
        if not arrays:
            return {}
        now = time.monotonic()
        if arrays <= self._arrays and now - self._at < self.min_interval_s:
            return self._rows
        ids = ",".join(sorted(arrays, key=lambda j: (len(j), j)))
        cmd = ["sacct", "-X", "-D", "-P", "-n", "-o", ",".join(FIELDS), "-j", ids]
        self.calls += 1
        try:
            proc = self.runner(cmd, capture_output=True, text=True, timeout=120,
                               env={**os.environ, "SLURM_TIME_FORMAT": "%s"})
        except (OSError, subprocess.SubprocessError) as exc:
            self.error = f"sacct failed: {exc}"
            return {}
        if proc.returncode != 0:
            self.error = f"sacct failed: {proc.stderr.strip() or f'exit {proc.returncode}'}"
            return {}
        self.error = None
        self._at, self._arrays, self._rows = now, arrays, parse_sacct(proc.stdout)
        return self._rows
