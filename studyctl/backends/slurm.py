"""Slurm backend: submitit job arrays, one sbatch per resource shape (split at MaxArraySize).

Everything Slurm-specific lives here: options, sbatch through submitit, the one batched `sacct`
per refresh, state mapping, scancel, and finding jobs again after a crash. Jobs are named
`studyctl-<study>-<manifest>`; the manifest (written before sbatch) maps array indices to task
files, so a studyctl killed between sbatch and the ledger write loses nothing.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from studyctl.backends.base import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.fsutil import atomic_write_json
from studyctl.outcome import read_outcome
from studyctl.states import FailureClass, State

GIB = 1 << 30
SACCT_MIN_INTERVAL_S = 2.0
SLURM_STATES: dict[str, State] = {
    "PENDING": State.PENDING, "REQUEUED": State.PENDING, "REQUEUE_HOLD": State.PENDING, "RESIZING": State.PENDING,
    "SUSPENDED": State.PENDING, "CONFIGURING": State.RUNNING, "RUNNING": State.RUNNING,
    "COMPLETING": State.RUNNING, "STAGE_OUT": State.RUNNING, "SIGNALING": State.RUNNING,
    "COMPLETED": State.COMPLETED, "FAILED": State.FAILED, "BOOT_FAIL": State.NODE_FAIL,
    "DEADLINE": State.TIMEOUT, "TIMEOUT": State.TIMEOUT, "CANCELLED": State.CANCELLED,
    "NODE_FAIL": State.NODE_FAIL, "PREEMPTED": State.PREEMPTED, "OUT_OF_MEMORY": State.OUT_OF_MEMORY,
    "REVOKED": State.CANCELLED,
}
FAILURE_OF: dict[State, FailureClass] = {
    State.TIMEOUT: FailureClass.TIMEOUT, State.CANCELLED: FailureClass.CANCELLED,
    State.NODE_FAIL: FailureClass.SCHEDULER, State.PREEMPTED: FailureClass.SCHEDULER,
    State.OUT_OF_MEMORY: FailureClass.WORKER_CRASH, State.FAILED: FailureClass.WORKER_CRASH,
}


class SlurmOptions(BaseModel):
    """The sweep's `slurm:` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_min: int | None = Field(None, ge=1, description="per point; default: derived from planned bytes")
    assumed_GiBps_per_node: float = Field(0.5, gt=0, description="for derived time limits (pessimistic)")
    min_time_limit_min: int = Field(5, ge=1)
    constraint: str | None = None
    exclusive: bool = False
    mpi: str = "pmi2"
    array_parallelism: int = Field(256, ge=1)
    sbatch_extra: dict[str, str | int | bool] = {}
    srun_args: list[str] = []
    setup: list[str] = []
    python: str | None = None
    max_array_size: int | None = Field(None, ge=1, description="default: the cluster's MaxArraySize")


def time_limit_min(options: SlurmOptions, launch: Launch) -> int:
    """The sweep's limit, or one derived from the bytes the point moves at a pessimistic bandwidth."""
    if options.time_limit_min:
        return options.time_limit_min
    point = launch.point
    from studyctl.layout import summarize

    moved = summarize(point.model, point.parallelism, point.checkpoint.scale).total_bytes * (
        point.checkpoint.writes + point.checkpoint.reads)
    minutes = 2 + moved / (point.nodes * options.assumed_GiBps_per_node * GIB) / 60
    bucket = 5 if minutes < 60 else 30  # few distinct limits: few shapes, few sbatch calls
    return max(options.min_time_limit_min, int(math.ceil(minutes / bucket) * bucket))


def shape_of(options: SlurmOptions, launch: Launch) -> tuple[int, int, int]:
    """What makes two points share one job array."""
    return launch.point.nodes, launch.point.ranks_per_node, time_limit_min(options, launch)


@lru_cache(maxsize=1)
def cluster_max_array_size() -> int:
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 1001
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(m.group(1)) if m else 1001


def _one_line(text: str, limit: int = 400) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    interesting = [ln for ln in lines if "error" in ln.lower() or "failed" in ln.lower()] or lines
    return " | ".join(interesting[-3:])[:limit]


def expand_job_ids(text: str) -> list[str]:
    """'12_[3-5,7%2]' → ['12_3', '12_4', '12_5', '12_7']; plain ids pass through."""
    m = re.fullmatch(r"(\d+)_\[([^\]]+)\]", text)
    if not m:
        return [text]
    out = []
    for part in m.group(2).split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        out += [f"{m.group(1)}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


class SlurmBackend:
    name = "slurm"

    def __init__(self, options: SlurmOptions, folder: Path) -> None:
        self.options = options
        self.folder = folder
        self._sacct_cache: tuple[float, tuple[str, ...], dict[str, dict[str, str]]] | None = None
        self.sbatch_calls = 0

    # ---------------------------------------------------------------- submit
    def _executor(self, study: str, shape: tuple[int, int, int], manifest: str, count: int) -> Any:
        import submitit

        nodes, per_node, minutes = shape
        ex = submitit.SlurmExecutor(folder=self.folder / "%j", python=self.options.python or sys.executable)
        params: dict[str, Any] = {
            "nodes": nodes, "ntasks_per_node": per_node, "cpus_per_task": 1, "time": minutes,
            "job_name": f"studyctl-{study}-{manifest}", "array_parallelism": min(self.options.array_parallelism, count),
            "srun_args": [f"--mpi={self.options.mpi}", *self.options.srun_args],
            "signal_delay_s": 30 if minutes <= 5 else 90,
        }
        for key in ("partition", "account", "qos", "constraint"):
            if getattr(self.options, key):
                params[key] = getattr(self.options, key)
        if self.options.exclusive:
            params["exclusive"] = True
        if self.options.setup:
            params["setup"] = list(self.options.setup)
        if self.options.sbatch_extra:
            params["additional_parameters"] = dict(self.options.sbatch_extra)
        ex.update_parameters(**params)
        return ex

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate) -> None:
        """One sbatch (a job array) per shape and chunk; handles recorded right after each sbatch."""
        from worker.run import run_task

        groups: dict[tuple[int, int, int], list[Launch]] = {}
        for launch in launches:
            groups.setdefault(shape_of(self.options, launch), []).append(launch)
        chunk = self.options.max_array_size or cluster_max_array_size()
        for shape, members in groups.items():
            for start in range(0, len(members), chunk):
                part = members[start:start + chunk]
                manifest = uuid.uuid4().hex[:8]
                atomic_write_json(self.folder / "manifests" / f"{manifest}.json",
                                  {"study": part[0].study, "tasks": [str(m.task_file) for m in part],
                                   "attempts": [[m.point_id, m.attempt] for m in part]})
                ex = self._executor(part[0].study, shape, manifest, len(part))
                try:
                    with ex.batch():
                        jobs = [ex.submit(run_task, str(m.task_file)) for m in part]
                except Exception as exc:  # sbatch said no: the whole array is rejected, the study goes on
                    reason = "Slurm rejected the job: " + _one_line(str(exc))
                    for m in part:
                        record_update(Update(m.point_id, m.attempt, State.FAILED, FailureClass.SCHEDULER, reason,
                                             ended_at=time.time()))
                    continue
                finally:
                    self.sbatch_calls += 1
                for m, job in zip(part, jobs, strict=True):
                    index = int(job.job_id.split("_")[1]) if "_" in job.job_id else None
                    record_handle(m, Handle(job_id=job.job_id, array_index=index))
                    record_update(Update(m.point_id, m.attempt, State.PENDING))

    # ---------------------------------------------------------------- poll
    def _sacct(self, job_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """One batched sacct for many jobs; repeated calls within 2 s reuse the answer."""
        arrays = tuple(sorted({j.split("_")[0] for j in job_ids}))
        now = time.monotonic()
        if self._sacct_cache and self._sacct_cache[1] == arrays and now - self._sacct_cache[0] < SACCT_MIN_INTERVAL_S:
            return self._sacct_cache[2]
        fields = ["JobID", "JobName", "State", "ExitCode", "NodeList", "Start", "End", "Reason"]
        cmd = ["sacct", "-X", "-P", "-n", "-o", ",".join(fields), "-j", ",".join(arrays)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return {}
        rows: dict[str, dict[str, str]] = {}
        for line in out.splitlines():
            values = line.split("|")
            if len(values) != len(fields):
                continue
            row = dict(zip(fields, values, strict=True))
            for jid in expand_job_ids(row["JobID"]):
                rows[jid] = row
        self._sacct_cache = (now, arrays, rows)
        return rows

    def _log_tail(self, job_id: str) -> str:
        for path in sorted(self.folder.glob(f"**/{job_id}_0_log.err")):
            try:
                return path.read_text(errors="replace")[-4000:]
            except OSError:
                pass
        return ""

    def poll(self, active: Sequence[Active]) -> list[Update]:
        with_ids = [a for a in active if a.handle.job_id]
        rows = self._sacct([a.handle.job_id for a in with_ids]) if with_ids else {}
        updates = []
        for a in with_ids:
            launch, row = a.launch, rows.get(a.handle.job_id)
            if row is None:
                continue  # not in accounting yet (slurmdbd lags a second or two)
            slurm_state = row["State"].split()[0]
            state = SLURM_STATES.get(slurm_state, State.FAILED)
            node_list = row["NodeList"] if row["NodeList"] not in ("", "None assigned") else None
            if state in (State.PENDING, State.RUNNING):
                updates.append(Update(launch.point_id, launch.attempt, state, node_list=node_list))
                continue
            outcome = read_outcome(launch.attempt_dir, launch.point_id, launch.attempt)
            if outcome is not None:  # the worker's own record wins
                updates.append(Update(**{**outcome.__dict__, "node_list": outcome.node_list or node_list}))
                continue
            log = self._log_tail(a.handle.job_id)
            if state is State.FAILED and "timed-out" in log:
                state = State.TIMEOUT  # submitit's USR2 handler ended it just before Slurm did
            if state is State.COMPLETED:
                state, reason = State.FAILED, "job completed but left no result file"
            elif state is State.TIMEOUT:
                reason = f"Slurm time limit reached (job {a.handle.job_id})"
            elif state is State.CANCELLED:
                reason = f"Slurm: {row['State']}"
            else:
                reason = _one_line(log) or f"Slurm: {row['State']} exit {row['ExitCode']} {row['Reason']}".strip()
            exit_code = int(row["ExitCode"].split(":")[0]) if row["ExitCode"][:1].isdigit() else None
            updates.append(Update(launch.point_id, launch.attempt, state, FAILURE_OF.get(state, FailureClass.LOST),
                                  reason, exit_code, node_list))
        return updates

    def recover_handles(self, study: str, active: Sequence[Active]) -> list[tuple[Active, Handle]]:
        """Attempts submitted by a studyctl that died before recording job ids: find them by job name."""
        missing = {str(a.launch.task_file): a for a in active if not a.handle.job_id}
        if not missing:
            return []
        names = ",".join(self._manifest_names(study))
        # squeue knows queued jobs at once; sacct knows finished ones (slurmdbd lags a little behind).
        out = ""
        for cmd in (["squeue", "-r", "-h", "-o", "%i|%j", "--name", names],
                    ["sacct", "-X", "-P", "-n", "-o", "JobID,JobName", "--name", names, "-S", "now-7days"]):
            try:
                out += subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
            except (OSError, subprocess.SubprocessError):
                continue
        found = []
        for line in out.splitlines():
            jid, _, name = line.partition("|")
            manifest = name.rsplit("-", 1)[-1]
            try:
                tasks = json.loads((self.folder / "manifests" / f"{manifest}.json").read_text())["tasks"]
            except (OSError, ValueError, KeyError):
                continue
            for full in expand_job_ids(jid):
                _, _, index = full.partition("_")
                if not index.isdigit() or int(index) >= len(tasks):
                    continue
                a = missing.pop(tasks[int(index)], None)
                if a is not None:
                    found.append((a, Handle(job_id=full, array_index=int(index))))
        return found

    def _manifest_names(self, study: str) -> list[str]:
        return [f"studyctl-{study}-{p.stem}" for p in (self.folder / "manifests").glob("*.json")] or ["-"]

    def cancel(self, active: Sequence[Active]) -> None:
        ids = [a.handle.job_id for a in active if a.handle.job_id]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, text=True, timeout=60, check=False)
