"""Submitting attempts: one submitit job array per resource shape (split at MaxArraySize), sbatch retries.

Transient sbatch failures (controller restarting or unreachable) are retried with backoff, looking for
an accepted-but-unacknowledged array by name first; Slurm's refusals fail only that array's points.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from studyctl.attempt.records import Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.backends.slurm.discovery import Manifests, find_jobs, job_name
from studyctl.backends.slurm.sacct import Runner, index_of
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.checkpoint.recovery import allocation_nodes
from studyctl.definition.inputs.options import SlurmOptions
from studyctl.definition.planning.run_time import point_run_seconds
from studyctl.definition.planning.sweep import Estimate
from studyctl.states import FailureClass, State

DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's own default
# sbatch failures that say nothing about the job: the controller was busy, restarting or unreachable.
TRANSIENT_SBATCH = re.compile(r"Unable to contact slurm controller|Socket timed out|temporarily unable|"
                              r"Resource temporarily unavailable|Zero Bytes were transmitted|"
                              r"Transport endpoint is not connected", re.IGNORECASE)
SBATCH_RETRY_DELAYS_S = (2.0, 5.0, 10.0, 20.0)  # with sbatch's own ~10 s connect timeout: ~1.5 min in all
Shape = tuple[int, int, int, bool]  # nodes, tasks per node, minutes, relaunch (a recovery point's restart)
# A derived time limit's fixed part, beyond the point's bytes and training: job start, imports, MPI init.
LIMIT_OVERHEAD_S = 120.0


def time_limit_min(options: SlurmOptions, launch: Launch) -> int:
    """The sweep's limit, the launch's own, or one derived from the point (see `point_time_limit_min`)."""
    return point_time_limit_min(options, launch.point, launch.time_limit_s)


def point_time_limit_min(options: SlurmOptions, point: Point, limit_s: int | None = None) -> int:
    """The sweep's limit, `limit_s`, or one derived from the point's run time as the plan estimates it
    (`run_time`), at a pessimistic bandwidth and overhead, rounded up to few distinct values (few shapes, few
    sbatch calls)."""
    if options.time_limit_min:
        return options.time_limit_min
    if limit_s:
        return max(1, math.ceil(limit_s / 60))
    try:
        minutes = point_run_seconds(point, _pessimistic(options.assumed_GiBps_per_node)) / 60
    except Exception:  # an impossible layout: the worker says why, quickly
        return options.min_time_limit_min
    bucket = 5 if minutes < 60 else 30
    return max(options.min_time_limit_min, int(math.ceil(minutes / bucket) * bucket))


@lru_cache(maxsize=16)
def _pessimistic(GiBps_per_node: float) -> Estimate:
    """The run-time assumptions of a derived time limit: the Slurm section's rate, and LIMIT_OVERHEAD_S."""
    return Estimate(GiBps_per_node=GiBps_per_node, overhead_s=LIMIT_OVERHEAD_S)


def shape_of(options: SlurmOptions, launch: Launch) -> Shape:
    """What makes two points share one job array: (nodes, tasks per node, minutes, relaunch). A recovery point's
    allocation holds the larger of its two worlds, each started as a job step by `worker.relaunch`.

    Partition, account, qos, constraint, exclusive and extra arguments are the same for every point
    of a backend (they come from the sweep's one `slurm:` section), so they never split a group.
    """
    point = launch.point
    nodes = allocation_nodes(point.nodes, point.ranks_per_node, point.recovery)
    return nodes, point.ranks_per_node, time_limit_min(options, launch), point.recovery is not None


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


def group_by_shape(options: SlurmOptions, launches: Sequence[Launch], chunk: int) -> list[tuple[Shape, list[Launch]]]:
    """One group per shape, split into arrays of at most `chunk` elements."""
    groups: dict[Shape, list[Launch]] = {}
    for launch in launches:
        groups.setdefault(shape_of(options, launch), []).append(launch)
    return [(shape, members[start:start + chunk]) for shape, members in groups.items()
            for start in range(0, len(members), chunk)]


def srun_args(options: SlurmOptions) -> list[str]:
    return [f"--mpi={options.mpi}", *options.srun_args]


def executor(options: SlurmOptions, folder: Path, study: str, shape: Shape, manifest: str, count: int) -> Any:
    """A submitit SlurmExecutor for one array of `count` elements of `shape`."""
    import submitit

    nodes, per_node, minutes, relaunch = shape
    ex = submitit.SlurmExecutor(folder=folder / "%j", max_num_timeout=options.max_requeues,
                                python=options.python or shlex.quote(sys.executable))
    params: dict[str, Any] = {
        "nodes": nodes, "ntasks_per_node": per_node, "cpus_per_task": 1, "time": minutes,
        "job_name": job_name(study, manifest), "comment": f"studyctl study={study} manifest={manifest}",
        "array_parallelism": min(options.array_parallelism, count),
        "srun_args": srun_args(options),
        "use_srun": not relaunch,  # a relaunch runs once in the batch script and starts its worlds with srun
        "signal_delay_s": 30 if minutes <= 5 else 90,
    }
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(options, key):
            params[key] = getattr(options, key)
    if options.exclusive:
        params["exclusive"] = True
    if options.setup:
        params["setup"] = list(options.setup)
    extra = options.sbatch_parameters()
    extra["requeue" if options.max_requeues else "no-requeue"] = True
    params["additional_parameters"] = extra
    ex.update_parameters(**params)
    return ex


class ArraySubmitter:
    """sbatch of one array per call, through submitit; counts the sbatch calls it makes."""

    def __init__(self, options: SlurmOptions, folder: Path, manifests: Manifests,
                 entry: Callable[[str], Any] | None, runner: Runner) -> None:
        self.options, self.folder, self.manifests = options, folder, manifests
        self.entry, self.runner = entry, runner
        self.sbatch_calls = 0

    def submit(self, shape: Shape, part: Sequence[Launch], record_handle: RecordHandle,
               record_update: RecordUpdate) -> None:
        """Handles are recorded right after sbatch returns; a refusal fails this array's points only."""
        handles = self._sbatch(shape, part, record_update)
        if handles is None:
            return
        for m, handle in zip(part, handles, strict=True):
            record_handle(m, handle)
            record_update(Update(m.point_id, m.attempt, State.PENDING))

    def _sbatch(self, shape: Shape, part: Sequence[Launch], record_update: RecordUpdate) -> list[Handle] | None:
        from submitit.core.utils import FailedJobError, FailedSubmissionError

        entry = self.entry
        if entry is None and shape[3]:
            from worker.relaunch import relaunch_srun

            entry = partial(relaunch_srun, srun_args=srun_args(self.options))
        elif entry is None:
            from worker.run import run_task as entry
        study = part[0].study
        manifest = self.manifests.write(part)
        ex = executor(self.options, self.folder, study, shape, manifest, len(part))
        for delay in (*SBATCH_RETRY_DELAYS_S, None):
            try:
                # submitit prints sbatch's stderr itself on failure; we report it once, as the points' reason
                with contextlib.redirect_stderr(io.StringIO()), ex.batch():
                    jobs = [ex.submit(entry, str(m.paths.task)) for m in part]
                return [Handle(job_id=job.job_id, array_index=index_of(job.job_id)) for job in jobs]
            except (FailedJobError, FailedSubmissionError) as exc:  # sbatch said no: this array only
                message = sbatch_message(str(exc))
                if delay is not None and TRANSIENT_SBATCH.search(message):
                    found = self._accepted(study, manifest, len(part))
                    if found is not None:
                        return found
                    time.sleep(delay)
                    continue
                reason = "Slurm rejected the job: " + message
                for m in part:
                    record_update(Update(m.point_id, m.attempt, State.FAILED, FailureClass.SCHEDULER, reason,
                                         ended_at=time.time()))
                return None
            finally:
                self.sbatch_calls += 1
        return None  # unreachable: the last delay is None, so the loop returns or records the refusal

    def _accepted(self, study: str, manifest: str, count: int) -> list[Handle] | None:
        """A timed-out sbatch may still have been accepted: the array's elements found by name, else None."""
        found = sorted((j for j in find_jobs(study, ("squeue",), self.runner) if j.manifest == manifest),
                       key=lambda j: j.array_index or 0)
        if len(found) != count:
            return None
        return [Handle(job_id=j.job_id, array_index=j.array_index) for j in found]
