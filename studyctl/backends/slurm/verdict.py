"""What a job's accounting record (and the files it left) mean for its attempt: state, failure, reason.

The worker's own result or error file always wins; these verdicts are for everything else: jobs still
queued or running, over their requeue budget, ended without a worker record, reused ids, vanished
ids, and attempts that never reached the scheduler.
"""

from __future__ import annotations

import pickle
import re
import time
from pathlib import Path
from typing import Any

from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.records import Active, Launch, Update
from studyctl.backends.slurm.sacct import FAILURE_OF, SacctRow
from studyctl.states import FailureClass, State

# A shared filesystem may show result.json to this host a little after the job ended (NFS attribute caching).
RESULT_GRACE_S = 30.0
# A job id that neither squeue nor sacct knows this long after sbatch is gone (accounting purged or reset).
VANISHED_AFTER_S = 900.0
# An attempt with no job id this long after submission, and no job under its name, never reached Slurm.
NEVER_SUBMITTED_AFTER_S = 120.0


def job_verdict(launch: Launch, row: SacctRow, max_requeues: int, job_folder: Path) -> Update | None:
    """The update for an attempt whose job accounting knows (and names as this study's).

    None: nothing to say yet. A PREEMPTED update for a live job means: over its requeue budget, cancel it.
    """
    job_id = row.job_id
    if row.state in (State.PENDING, State.RUNNING):
        if row.requeues > max_requeues:
            return Update(launch.point_id, launch.attempt, State.PREEMPTED, FailureClass.SCHEDULER,
                          f"Slurm requeued job {job_id} {row.requeues} times, more than "
                          f"slurm.max_requeues = {max_requeues}: cancelled", ended_at=time.time())
        return Update(launch.point_id, launch.attempt, row.state, node_list=row.node_list, started_at=row.start)
    outcome = read_outcome(launch.paths, launch.point_id, launch.attempt)
    if outcome is not None:  # the worker's own record wins
        return Update(outcome.point_id, outcome.attempt, outcome.state, outcome.failure_class, outcome.reason,
                      row.exit_code, outcome.node_list or row.node_list, row.start, row.end or outcome.ended_at)
    return final_update(launch, row, submitit_error(job_folder, job_id), log_tail(job_folder, job_id))


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
    elif state is State.PREEMPTED:
        reason = f"preempted and out of requeues ({where})"
    elif state in (State.CANCELLED, State.NODE_FAIL, State.OUT_OF_MEMORY):
        reason = f"Slurm: {row.state_text} ({where})"
    else:
        detail = _last_error_line(submitit_error) or _last_error_line(log_tail)
        slurm = f"Slurm: {row.state_text} exit {row.exit_code}" + (f", {row.reason}" if row.reason else "")
        reason = f"{detail} ({where}; {slurm})" if detail else f"{slurm} ({where})"
    return Update(launch.point_id, launch.attempt, state, FAILURE_OF.get(state, FailureClass.LOST),
                  reason[:600], row.exit_code, row.node_list, row.start, row.end)


def reused_id(launch: Launch, job_id: str, name: str) -> Update:
    """Job ids restart when a cluster is rebuilt: the id now names another job."""
    return Update(launch.point_id, launch.attempt, State.LOST, FailureClass.LOST,
                  f"Slurm job {job_id} is now {name!r}, not this study's (was the cluster's accounting reset?)",
                  ended_at=time.time())


def vanished(a: Active) -> Update:
    """A job id slurmctld and accounting both forgot: its result file, else LOST."""
    launch, job_id = a.launch, a.handle.job_id or ""
    outcome = read_outcome(launch.paths, launch.point_id, launch.attempt)
    if outcome is not None:
        return outcome
    minutes = (time.time() - (a.since or time.time())) / 60
    return Update(launch.point_id, launch.attempt, State.LOST, FailureClass.LOST,
                  f"Slurm job {job_id} is in neither squeue nor sacct {minutes:.0f} min after sbatch "
                  "(accounting purged or reset?)", ended_at=time.time())


def never_submitted(a: Active, now: float) -> Update | None:
    """An attempt without a job id (none found by name either) long after it was opened: LOST."""
    if a.handle.job_id or a.since is None or now - a.since <= NEVER_SUBMITTED_AFTER_S:
        return None
    return Update(a.launch.point_id, a.launch.attempt, State.LOST, FailureClass.LOST,
                  "never reached the scheduler (studyctl stopped before sbatch returned)", ended_at=now)


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only plain data (tuples, strings, numbers…): a pickle naming any class or function is refused, so
    a result pickle in a study directory from someone else cannot run code (submitit's own loader would)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: only plain data is read")


def submitit_error(job_folder: Path, job_id: str) -> str | None:
    """The traceback submitit pickled for task 0, if the task got as far as raising.

    submitit pickles ("error", traceback text) for a task that raised: plain data, read without submitit's
    loader. Anything else (a success value, a foreign or torn pickle) gives None; the log tail explains then.
    """
    path = job_folder / f"{job_id}_0_result.pkl"
    if not path.is_file():
        return None
    try:
        with path.open("rb") as fh:
            outcome, value = _PlainDataUnpickler(fh).load()
    except Exception:  # a torn, foreign or non-plain pickle is no reason to fail a poll
        return None
    return str(value) if outcome == "error" else None


def log_tail(job_folder: Path, job_id: str, size: int = 8192) -> str:
    path = job_folder / f"{job_id}_0_log.err"
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _last_error_line(text: str | None) -> str:
    """The exception line of a traceback, or the last line that says error/failed."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Failure|Interrupt|Exit)\b", ln) or "error" in ln.lower():
            return ln[:400]
    return lines[-1][:400] if lines else ""
