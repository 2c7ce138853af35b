"""Slurm backend: submit-and-return. `launch` returns once sbatch has; `poll` asks sacct; `cancel` scancels.

The parts live beside it: `submit` (submitit arrays, shapes, sbatch retries), `sacct` (parsing, the
batched watcher), `discovery` (jobs by name, manifests) and `verdict` (a job's record → our state).
Every Slurm command but sbatch goes through `runner` (subprocess.run), so tests can feed it output.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.backends.base import Backend
from studyctl.backends.capacity import slurm_node_memory
from studyctl.backends.slurm import verdict
from studyctl.backends.slurm.cleanup import TidyRecords, node_names, submit_cleanup
from studyctl.backends.slurm.discovery import Manifests, find_jobs, names_other_study, recover_handles
from studyctl.backends.slurm.sacct import Runner, SacctWatcher, array_of
from studyctl.backends.slurm.submit import ArraySubmitter, cluster_max_array_size, group_by_shape, point_time_limit_min
from studyctl.definition.checkpoint.places import Place
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.inputs.options import SlurmOptions
from studyctl.errors import UserError
from studyctl.states import State

if TYPE_CHECKING:
    from studyctl.attempt.paths import StudyPaths
    from studyctl.definition.planning.plan import Capacity
    from studyctl.definition.planning.sweep import SweepFile

SCANCEL_BATCH = 500


class SlurmBackend(Backend):
    """Jobs outlive studyctl; Slurm enforces their time limits; lost job ids are found again by name."""

    name = "slurm"
    runs_to_completion: ClassVar[bool] = False
    initial_state: ClassVar[State] = State.SUBMITTED
    time_limit_setting: ClassVar[str] = "slurm.time_limit_min"

    def __init__(self, options: SlurmOptions, folder: Path, entry: Callable[[str], Any] | None = None,
                 runner: Runner = subprocess.run) -> None:
        self.options = options
        self.folder = folder
        self.runner = runner
        self.watcher = SacctWatcher(runner=runner)
        self.manifests = Manifests(folder)
        self.tidy = TidyRecords(folder)
        # entry: what every srun task calls with the task file; default worker.run.run_task
        self.submitter = ArraySubmitter(options, folder, self.manifests, entry, runner)

    @classmethod
    def from_sweep(cls, sweep: SweepFile, paths: StudyPaths) -> SlurmBackend:
        return cls(sweep.slurm, paths.slurm)

    @classmethod
    def capacity(cls, sweep: SweepFile) -> Capacity:
        """Memory: the smallest RealMemory of the partition's nodes (sinfo), per host."""
        memory, source = slurm_node_memory(sweep.slurm.partition)
        return dataclasses.replace(super().capacity(sweep), host_memory_bytes=memory, host_memory_source=source)

    @classmethod
    def point_time_limit_s(cls, sweep: SweepFile, point: Point) -> int | None:
        """slurm.time_limit_min, else the limit derived from the point (as its sbatch will carry)."""
        return 60 * point_time_limit_min(sweep.slurm, point)

    @classmethod
    def launched_tasks(cls, paths: StudyPaths) -> set[str]:
        """Every task file in the study's manifests (each written before its sbatch)."""
        return Manifests(paths.slurm).all_tasks()

    @property
    def sbatch_calls(self) -> int:
        return self.submitter.sbatch_calls

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        """One sbatch (a job array) per shape and chunk; handles recorded right after each sbatch."""
        if not launches:
            return
        missing = [c for c in ("sbatch", "srun", "sacct") if shutil.which(c) is None]
        if missing:
            raise UserError(f"{', '.join(missing)} not found on PATH: submit from a Slurm login node "
                            "(or start the local cluster: scripts/slurm-local-cluster.sh up)", 1)
        chunk = self.options.max_array_size or cluster_max_array_size()
        for shape, part in group_by_shape(self.options, launches, chunk):
            self.submitter.submit(shape, part, record_handle, record_update)

    def poll(self, active: Sequence[Active]) -> list[Update]:
        """Backend view of attempts: one (cached) sacct for all with a job id; verdicts for the rest."""
        now = time.time()
        updates = [u for a in active if (u := verdict.never_submitted(a, now)) is not None]
        with_ids = [a for a in active if a.handle.job_id]
        rows = self.watcher.rows(a.handle.job_id for a in with_ids if a.handle.job_id)
        unaccounted, over_budget = [], []
        for a in with_ids:
            launch, job_id = a.launch, a.handle.job_id or ""
            row = rows.get(job_id)
            if row is None:  # not in accounting yet (slurmdbd lags a second or two), or gone
                if self.watcher.error is None and a.since is not None and now - a.since > verdict.VANISHED_AFTER_S:
                    unaccounted.append(a)
                continue
            if names_other_study(row.name, launch.study):
                updates.append(verdict.reused_id(launch, job_id, row.name))
                continue
            update = verdict.job_verdict(launch, row, self.options.max_requeues, self.folder / job_id)
            if update is None:
                continue
            if update.state is State.PREEMPTED and row.state in (State.PENDING, State.RUNNING):
                over_budget.append(job_id)
            updates.append(update)
        if over_budget:
            self._scancel(over_budget)
        return updates + self._vanished(unaccounted)

    def _vanished(self, unaccounted: Sequence[Active]) -> list[Update]:
        """Attempts whose job id slurmctld and accounting both forgot: their result file, else LOST."""
        known: set[str] = set()
        for study in {a.launch.study for a in unaccounted}:
            known |= {j.job_id for j in find_jobs(study, runner=self.runner)}
        return [verdict.vanished(a) for a in unaccounted if a.handle.job_id not in known]

    def note(self) -> str | None:
        """Why states may be stale (sacct failing), for a status line."""
        return self.watcher.error

    def recover(self, active: Sequence[Active]) -> list[tuple[Active, Handle]]:
        """Attempts submitted by a studyctl that died before recording job ids: found by job name."""
        found: list[tuple[Active, Handle]] = []
        for study in sorted({a.launch.study for a in active if not a.handle.job_id}):
            found += recover_handles(self.manifests, study, [a for a in active if a.launch.study == study],
                                     self.runner)
        return found

    def cancel(self, active: Sequence[Active]) -> None:
        """scancel by job id (array elements individually); jobs the ledger lost are found by name first."""
        ids = [a.handle.job_id for a in active if a.handle.job_id]
        ids += [h.job_id for _, h in self.recover(active) if h.job_id]
        self._scancel(ids)

    def still_running(self, attempts: Mapping[Path, Handle]) -> set[Path]:
        """Attempts whose job accounting still shows pending or running: a point's end read from its files
        (its error record, a rank's abort) comes before the job's other ranks are gone."""
        # the clean-up jobs recorded are asked about in the same sacct call: each is read next, per place
        rows = self.watcher.rows([*(h.job_id for h in attempts.values() if h.job_id), *self.tidy.all_ids()])
        return {task for task, h in attempts.items()
                if h.job_id and (row := rows.get(h.job_id)) is not None and row.state in (State.PENDING, State.RUNNING)}

    def remove_node_local(self, place: Place, point: Point, node_list: str | None,
                          completed: bool = False, job_id: str | None = None) -> bool:
        """True once a clean-up job on the nodes the attempt ran on (its tier is theirs alone: `slurm/cleanup.py`)
        COMPLETED; a later command asks again while it pends or runs, and submits it anew if it ended otherwise.
        No job for a completed attempt, whose worker removed its tier itself (a job per point would be a second job)."""
        if completed:
            return True
        tidy_id = self.tidy.read(job_id, place)
        if tidy_id is not None:
            tidy = self.watcher.rows([tidy_id]).get(tidy_id)
            if tidy is None or tidy.state in (State.PENDING, State.RUNNING):
                return False  # not in accounting yet, or not done: a later command
            if tidy.state is State.COMPLETED:
                self.tidy.forget(job_id, place)
                return True
        if not node_list and job_id:  # ended before a poll saw it run (cancelled): accounting knows its nodes
            row = self.watcher.rows([job_id]).get(job_id)
            if row is None:
                return False  # not in accounting yet: a later command
            node_list = row.node_list
        if not node_list:
            return True  # never started on a node: nothing was written there
        nodes = node_names(node_list, self.runner)
        tidy_id = submit_cleanup(self.options, self.folder, place, nodes, self.runner, job_id) if nodes else None
        if tidy_id is not None:
            self.tidy.write(job_id, place, tidy_id)
        return False

    def _scancel(self, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), SCANCEL_BATCH):
            self.runner(["scancel", *ids[start:start + SCANCEL_BATCH]], capture_output=True, text=True,
                        timeout=120, check=False)


def array_ids(handles: Sequence[Handle]) -> list[str]:
    """The distinct arrays (sbatch calls) behind some handles."""
    return sorted({array_of(h.job_id) for h in handles if h.job_id}, key=lambda j: (len(j), j))
