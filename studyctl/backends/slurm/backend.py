"""Slurm backend: submitit job arrays, one sbatch per resource shape (split at MaxArraySize).

Everything Slurm-specific lives here and in `slurm_sacct.py`: options, sbatch through submitit,
the one batched `sacct` per refresh, state mapping, scancel, and finding jobs again after a
crash. Jobs are named `studyctl-<study>-<manifest>`; the manifest (written before sbatch) maps
array indices to task files, so a studyctl killed between sbatch and the ledger write loses nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.backends.slurm.sacct import (
    FAILURE_OF,
    SacctRow,
    SacctWatcher,
    array_of,
    expand_job_ids,
    index_of,
)
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_json
from studyctl.spec.options import SlurmOptions
from studyctl.states import FailureClass, State
from studyctl.units import GIB

__all__ = ["SlurmBackend", "expand_job_ids", "find_jobs", "shape_of", "time_limit_min"]

DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's own default
# A shared filesystem may show result.json to this host a little after the job ended (NFS attribute caching).
RESULT_GRACE_S = 30.0
# A job id that neither squeue nor sacct knows this long after sbatch is gone (accounting purged or reset).
VANISHED_AFTER_S = 900.0
FIND_JOBS_SINCE = "now-14days"
# sbatch failures that say nothing about the job: the controller was busy, restarting or unreachable.
TRANSIENT_SBATCH = re.compile(r"Unable to contact slurm controller|Socket timed out|temporarily unable|"
                              r"Resource temporarily unavailable|Zero Bytes were transmitted|"
                              r"Transport endpoint is not connected", re.IGNORECASE)
SBATCH_RETRY_DELAYS_S = (2.0, 5.0, 10.0, 20.0)  # with sbatch's own ~10 s connect timeout: ~1.5 min in all
# ------------------------------------------------------------------ shapes
def time_limit_min(options: SlurmOptions, launch: Launch) -> int:
    """The sweep's limit, the launch's own, or one derived from the bytes the point moves at a pessimistic
    bandwidth, rounded up to few distinct values (few shapes, few sbatch calls)."""
    if options.time_limit_min:
        return options.time_limit_min
    if launch.time_limit_s:
        return max(1, math.ceil(launch.time_limit_s / 60))
    point = launch.point
    try:
        per_checkpoint = point.layout().total_bytes
    except Exception:  # an impossible layout: the worker says why, quickly
        return options.min_time_limit_min
    moved = per_checkpoint * (point.checkpoint.writes + point.checkpoint.reads)
    minutes = 2 + moved / (point.nodes * options.assumed_GiBps_per_node * GIB) / 60
    bucket = 5 if minutes < 60 else 30
    return max(options.min_time_limit_min, int(math.ceil(minutes / bucket) * bucket))


def shape_of(options: SlurmOptions, launch: Launch) -> tuple[int, int, int]:
    """What makes two points share one job array: (nodes, tasks per node, minutes).

    Partition, account, qos, constraint, exclusive and extra arguments are the same for every point
    of a backend (they come from the sweep's one `slurm:` section), so they never split a group.
    """
    return launch.point.nodes, launch.point.ranks_per_node, time_limit_min(options, launch)


@lru_cache(maxsize=1)
def cluster_max_array_size() -> int:
    """MaxArraySize from `scontrol show config`, read once per process (indices go up to it minus 1)."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return DEFAULT_MAX_ARRAY_SIZE
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.M)
    return int(m.group(1)) if m else DEFAULT_MAX_ARRAY_SIZE


def sbatch_message(text: str, limit: int = 300) -> str:
    """sbatch's complaint in one line: its `error:` lines without the prefix, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [re.sub(r"^(sbatch: )?error: ", "", ln) for ln in lines if "error:" in ln]
    return ("; ".join(errors) or (lines[-1] if lines else "no message"))[:limit]


# ------------------------------------------------------------------ finding jobs by name
JOB_NAME = re.compile(r"studyctl-(?P<study>.+)-(?P<manifest>[0-9a-f]{8})")
PLACEHOLDER_NAME = "allocation"


def job_name(study: str, manifest: str) -> str:
    return f"studyctl-{study}-{manifest}"


@dataclass(frozen=True)
class FoundJob:
    """A job of a study found by its name (after a crash the ledger may not know it)."""

    job_id: str  # "123_4" or "123"
    manifest: str
    array_index: int | None


FIND_JOBS_QUERIES = {
    # slurmctld: queued, running and recently ended jobs (MinJobAge), with their names at once
    "squeue": ["squeue", "--me", "-h", "-r", "-t", "all", "-o", "%i|%j"],
    # slurmdbd: older ones (its first record of a job is named "allocation" for a few seconds)
    "sacct": ["sacct", "-X", "-P", "-n", "-o", "JobID,JobName", "-S", FIND_JOBS_SINCE],
}


def find_jobs(study: str, sources: Sequence[str] = ("squeue", "sacct")) -> list[FoundJob]:
    """Every job (array element) named for `study`, from slurmctld and from accounting."""
    found: dict[str, FoundJob] = {}
    for cmd in (FIND_JOBS_QUERIES[s] for s in sources):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in out.splitlines():
            jid, _, name = line.strip().partition("|")
            m = JOB_NAME.fullmatch(name)
            if not m or m.group("study") != study:
                continue
            for full in expand_job_ids(jid):
                found.setdefault(full, FoundJob(full, m.group("manifest"), index_of(full)))
    return sorted(found.values(), key=lambda j: (len(j.job_id), j.job_id))


# ------------------------------------------------------------------ how an attempt ended
def final_update(launch: Launch, row: SacctRow, submitit_error: str | None, log_tail: str) -> Update | None:
    """A finished job without a worker record → our state, failure class and one-line reason.

    `submitit_error` is the traceback submitit pickled for the task; `log_tail` the end of its stderr.
    None means "not yet": Slurm says COMPLETED but the result file may still be on its way.
    """
    state = row.state
    text = f"{submitit_error or ''}\n{log_tail}"
    if state in (State.FAILED, State.CANCELLED) and ("timed-out" in text or "DUE TO TIME LIMIT" in text):
        state = State.TIMEOUT  # submitit's USR2 handler (or slurmstepd) ended it just before Slurm did
    elif state in (State.FAILED, State.CANCELLED) and "DUE TO PREEMPTION" in text:
        state = State.PREEMPTED
    where = f"job {row.job_id}" + (f" on {row.node_list}" if row.node_list else "")
    if state is State.COMPLETED:
        if row.end is not None and time.time() - row.end < RESULT_GRACE_S:
            return None
        state, reason = State.FAILED, f"{where} completed but the worker left no result.json"
    elif state is State.TIMEOUT:
        reason = f"Slurm time limit reached ({where})"
    elif state is State.CANCELLED:
        reason = f"Slurm: {row.state_text} ({where})"
    elif state is State.PREEMPTED:
        reason = f"preempted and out of requeues ({where})"
    elif state in (State.NODE_FAIL, State.OUT_OF_MEMORY):
        reason = f"Slurm: {row.state_text} ({where})"
    else:
        detail = _last_error_line(submitit_error) or _last_error_line(log_tail)
        slurm = f"Slurm: {row.state_text} exit {row.exit_code}" + (f", {row.reason}" if row.reason else "")
        reason = f"{detail} ({where}; {slurm})" if detail else f"{slurm} ({where})"
    return Update(launch.point_id, launch.attempt, state, FAILURE_OF.get(state, FailureClass.LOST),
                  reason[:600], row.exit_code, row.node_list, row.start, row.end)


def _last_error_line(text: str | None) -> str:
    """The exception line of a traceback, or the last line that says error/failed."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Failure|Interrupt|Exit)\b", ln) or "error" in ln.lower():
            return ln[:400]
    return lines[-1][:400] if lines else ""


# ------------------------------------------------------------------ the backend
class SlurmBackend:
    """Submit-and-exit: `launch` returns once sbatch has; `poll` asks sacct; `cancel` runs scancel."""

    name = "slurm"

    def __init__(self, options: SlurmOptions, folder: Path,
                 entry: Callable[[str], Any] | None = None) -> None:
        self.options = options
        self.folder = folder
        self.entry = entry  # what every srun task calls with the task file; default worker.run.run_task
        self.watcher = SacctWatcher()
        self.sbatch_calls = 0

    # ---------------------------------------------------------------- submit
    def _executor(self, study: str, shape: tuple[int, int, int], manifest: str, count: int) -> Any:
        import submitit

        nodes, per_node, minutes = shape
        opts = self.options
        ex = submitit.SlurmExecutor(folder=self.folder / "%j", max_num_timeout=opts.max_requeues,
                                    python=opts.python or shlex.quote(sys.executable))
        params: dict[str, Any] = {
            "nodes": nodes, "ntasks_per_node": per_node, "cpus_per_task": 1, "time": minutes,
            "job_name": job_name(study, manifest), "comment": f"studyctl study={study} manifest={manifest}",
            "array_parallelism": min(opts.array_parallelism, count),
            "srun_args": [f"--mpi={opts.mpi}", *opts.srun_args],
            "signal_delay_s": 30 if minutes <= 5 else 90,
        }
        for key in ("partition", "account", "qos", "constraint"):
            if getattr(opts, key):
                params[key] = getattr(opts, key)
        if opts.exclusive:
            params["exclusive"] = True
        if opts.setup:
            params["setup"] = list(opts.setup)
        extra = opts.sbatch_parameters()
        extra["requeue" if opts.max_requeues else "no-requeue"] = True
        params["additional_parameters"] = extra
        ex.update_parameters(**params)
        return ex

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle,
               record_update: RecordUpdate) -> None:
        """One sbatch (a job array) per shape and chunk; handles recorded right after each sbatch."""
        if not launches:
            return
        missing = [c for c in ("sbatch", "srun", "sacct") if shutil.which(c) is None]
        if missing:
            raise UserError(f"{', '.join(missing)} not found on PATH: submit from a Slurm login node "
                            "(or start the local cluster: scripts/slurm-local-cluster.sh up)", 1)
        groups: dict[tuple[int, int, int], list[Launch]] = {}
        for launch in launches:
            groups.setdefault(shape_of(self.options, launch), []).append(launch)
        chunk = self.options.max_array_size or cluster_max_array_size()
        for shape, members in groups.items():
            for start in range(0, len(members), chunk):
                self._submit(shape, members[start:start + chunk], record_handle, record_update)

    def _submit(self, shape: tuple[int, int, int], part: Sequence[Launch], record_handle: RecordHandle,
                record_update: RecordUpdate) -> None:
        from submitit.core.utils import FailedJobError, FailedSubmissionError

        entry = self.entry
        if entry is None:
            from worker.run import run_task as entry
        study = part[0].study
        manifest = uuid.uuid4().hex[:8]
        atomic_write_json(self.folder / "manifests" / f"{manifest}.json", {
            "study": study, "job_name": job_name(study, manifest), "tasks": [str(m.task_file) for m in part],
            "attempts": [[m.point_id, m.attempt] for m in part]})
        ex = self._executor(study, shape, manifest, len(part))
        for delay in (*SBATCH_RETRY_DELAYS_S, None):
            try:
                # submitit prints sbatch's stderr itself on failure; we report it once, as the points' reason
                with contextlib.redirect_stderr(io.StringIO()), ex.batch():
                    jobs = [ex.submit(entry, str(m.task_file)) for m in part]
                handles = [Handle(job_id=job.job_id, array_index=index_of(job.job_id)) for job in jobs]
                break
            except (FailedJobError, FailedSubmissionError) as exc:  # sbatch said no: this array only
                message = sbatch_message(str(exc))
                if delay is not None and TRANSIENT_SBATCH.search(message):
                    # A timed-out sbatch may still have been accepted: look for the job by name first.
                    found = sorted((j for j in find_jobs(study, ("squeue",)) if j.manifest == manifest),
                                   key=lambda j: j.array_index or 0)
                    if len(found) == len(part):
                        handles = [Handle(job_id=j.job_id, array_index=j.array_index) for j in found]
                        break
                    time.sleep(delay)
                    continue
                reason = "Slurm rejected the job: " + message
                for m in part:
                    record_update(Update(m.point_id, m.attempt, State.FAILED, FailureClass.SCHEDULER, reason,
                                         ended_at=time.time()))
                return
            finally:
                self.sbatch_calls += 1
        for m, handle in zip(part, handles, strict=True):
            record_handle(m, handle)
            record_update(Update(m.point_id, m.attempt, State.PENDING))

    # ---------------------------------------------------------------- poll
    def _job_dir(self, job_id: str) -> Path:
        return self.folder / job_id  # submitit's folder "%j" becomes "<array>_<index>" for array elements

    def _submitit_error(self, job_id: str) -> str | None:
        """The traceback submitit pickled for task 0, if the task got as far as raising."""
        path = self._job_dir(job_id) / f"{job_id}_0_result.pkl"
        if not path.is_file():
            return None
        try:
            from submitit.core.utils import pickle_load

            outcome, value = pickle_load(path)
        except Exception:  # a torn or foreign pickle is no reason to fail a poll
            return None
        return str(value) if outcome == "error" else None

    def _log_tail(self, job_id: str, size: int = 8192) -> str:
        path = self._job_dir(job_id) / f"{job_id}_0_log.err"
        try:
            with path.open("rb") as fh:
                fh.seek(0, 2)
                fh.seek(max(0, fh.tell() - size))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def poll(self, active: Sequence[Active]) -> list[Update]:
        """Backend view of attempts with a job id: one (cached) sacct for all of them."""
        with_ids = [a for a in active if a.handle.job_id]
        rows = self.watcher.rows(a.handle.job_id for a in with_ids if a.handle.job_id)
        updates = []
        unaccounted = []
        over_budget: list[str] = []
        for a in with_ids:
            launch, job_id = a.launch, a.handle.job_id or ""
            row = rows.get(job_id)
            if row is None:  # not in accounting yet (slurmdbd lags a second or two), or gone
                if self.watcher.error is None and a.since is not None and time.time() - a.since > VANISHED_AFTER_S:
                    unaccounted.append(a)
                continue
            named = JOB_NAME.fullmatch(row.name)
            # Job ids restart when a cluster is rebuilt. slurmdbd's first record of a job is named
            # "allocation" until the real name arrives a few seconds later: no verdict from that one.
            if row.name != PLACEHOLDER_NAME and (not named or named.group("study") != launch.study):
                updates.append(Update(launch.point_id, launch.attempt, State.LOST, FailureClass.LOST,
                                      f"Slurm job {job_id} is now {row.name!r}, not this study's "
                                      "(was the cluster's accounting reset?)", ended_at=time.time()))
                continue
            state = row.state
            if state in (State.PENDING, State.RUNNING):
                if row.requeues > self.options.max_requeues:
                    over_budget.append(job_id)
                    updates.append(Update(launch.point_id, launch.attempt, State.PREEMPTED, FailureClass.SCHEDULER,
                                          f"Slurm requeued job {job_id} {row.requeues} times, more than "
                                          f"slurm.max_requeues = {self.options.max_requeues}: cancelled",
                                          ended_at=time.time()))
                else:
                    updates.append(Update(launch.point_id, launch.attempt, state, node_list=row.node_list,
                                          started_at=row.start))
                continue
            outcome = read_outcome(launch.attempt_dir, launch.point_id, launch.attempt)
            if outcome is not None:  # the worker's own record wins
                updates.append(Update(outcome.point_id, outcome.attempt, outcome.state, outcome.failure_class,
                                      outcome.reason, row.exit_code, outcome.node_list or row.node_list,
                                      row.start, row.end or outcome.ended_at))
                continue
            update = final_update(launch, row, self._submitit_error(job_id), self._log_tail(job_id))
            if update is not None:
                updates.append(update)
        if over_budget:
            subprocess.run(["scancel", *over_budget], capture_output=True, text=True, timeout=120, check=False)
        return updates + self._vanished(unaccounted)

    def _vanished(self, unaccounted: Sequence[Active]) -> list[Update]:
        """Attempts whose job id slurmctld and accounting both forgot: their result file, else LOST."""
        known: set[str] = set()
        for study in {a.launch.study for a in unaccounted}:
            known |= {j.job_id for j in find_jobs(study)}
        updates = []
        for a in unaccounted:
            launch, job_id = a.launch, a.handle.job_id or ""
            if job_id in known:
                continue
            outcome = read_outcome(launch.attempt_dir, launch.point_id, launch.attempt)
            if outcome is not None:
                updates.append(outcome)
                continue
            minutes = (time.time() - (a.since or time.time())) / 60
            updates.append(Update(launch.point_id, launch.attempt, State.LOST, FailureClass.LOST,
                                  f"Slurm job {job_id} is in neither squeue nor sacct {minutes:.0f} min after "
                                  "sbatch (accounting purged or reset?)", ended_at=time.time()))
        return updates

    @property
    def note(self) -> str | None:
        """Why states may be stale (sacct failing), for a status line."""
        return self.watcher.error

    # ---------------------------------------------------------------- crash recovery
    def recover_handles(self, study: str, active: Sequence[Active]) -> list[tuple[Active, Handle]]:
        """Attempts submitted by a studyctl that died before recording job ids: find them by job name."""
        missing = {str(a.launch.task_file): a for a in active if not a.handle.job_id}
        if not missing:
            return []
        manifests: dict[str, list[str]] = {}
        found = []
        for job in find_jobs(study):
            if job.manifest not in manifests:
                try:
                    data = json.loads((self.folder / "manifests" / f"{job.manifest}.json").read_text())
                    manifests[job.manifest] = list(data["tasks"])
                except (OSError, ValueError, KeyError):
                    manifests[job.manifest] = []  # another results folder's job of the same study name
            tasks = manifests[job.manifest]
            index = job.array_index if job.array_index is not None else 0  # a one-point group is a plain job
            if index >= len(tasks) or (job.array_index is None and len(tasks) != 1):
                continue
            a = missing.pop(tasks[index], None)
            if a is not None:
                found.append((a, Handle(job_id=job.job_id, array_index=job.array_index)))
        return found

    # ---------------------------------------------------------------- cancel
    def cancel(self, active: Sequence[Active]) -> None:
        """scancel by job id (array elements individually); jobs the ledger lost are found by name first."""
        ids = [a.handle.job_id for a in active if a.handle.job_id]
        lost = [a for a in active if not a.handle.job_id]
        for study in sorted({a.launch.study for a in lost}):
            found = self.recover_handles(study, [a for a in lost if a.launch.study == study])
            ids += [h.job_id for _, h in found if h.job_id]
        for start in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[start:start + 500]], capture_output=True, text=True, timeout=120,
                           check=False)


def array_ids(handles: Sequence[Handle]) -> list[str]:
    """The distinct arrays (sbatch calls) behind some handles."""
    return sorted({array_of(h.job_id) for h in handles if h.job_id}, key=lambda j: (len(j), j))
