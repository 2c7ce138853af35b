"""Finding a study's jobs again by name, and the manifests that map their array indices to attempts.

Jobs are named `studyctl-<study>-<manifest>`; the manifest (written before sbatch) lists the task files
of the array in index order, so a studyctl killed between sbatch and the ledger write loses nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from studyctl.attempt.records import Active, Handle, Launch
from studyctl.backends.slurm.sacct import Runner, expand_job_ids, index_of
from studyctl.fsutil import atomic_write_json

JOB_NAME = re.compile(r"studyctl-(?P<study>.+)-(?P<manifest>[0-9a-f]{8})")
# slurmdbd's first record of a job is named "allocation" until the real name arrives a few seconds later.
PLACEHOLDER_NAME = "allocation"
FIND_JOBS_SINCE = "now-14days"
FIND_JOBS_QUERIES = {
    # slurmctld: queued, running and recently ended jobs (MinJobAge), with their names at once
    "squeue": ["squeue", "--me", "-h", "-r", "-t", "all", "-o", "%i|%j"],
    # slurmdbd: older ones (its first record of a job is named "allocation" for a few seconds)
    "sacct": ["sacct", "-X", "-P", "-n", "-o", "JobID,JobName", "-S", FIND_JOBS_SINCE],
}


def job_name(study: str, manifest: str) -> str:
    return f"studyctl-{study}-{manifest}"


def names_other_study(name: str, study: str) -> bool:
    """True if a job's name says it belongs to no job of `study` (a reused job id), False if it may."""
    if name == PLACEHOLDER_NAME:
        return False
    named = JOB_NAME.fullmatch(name)
    return not named or named.group("study") != study


@dataclass(frozen=True)
class FoundJob:
    """A job of a study found by its name (after a crash the ledger may not know it)."""

    job_id: str  # "123_4" or "123"
    manifest: str
    array_index: int | None


def find_jobs(study: str, sources: Sequence[str] = ("squeue", "sacct"),
              runner: Runner = subprocess.run) -> list[FoundJob]:
    """Every job (array element) named for `study`, from slurmctld and from accounting."""
    found: dict[str, FoundJob] = {}
    for cmd in (FIND_JOBS_QUERIES[s] for s in sources):
        try:
            proc = runner(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode != 0:
            continue
        for line in proc.stdout.splitlines():
            jid, _, name = line.strip().partition("|")
            m = JOB_NAME.fullmatch(name)
            if not m or m.group("study") != study:
                continue
            for full in expand_job_ids(jid):
                found.setdefault(full, FoundJob(full, m.group("manifest"), index_of(full)))
    return sorted(found.values(), key=lambda j: (len(j.job_id), j.job_id))


class Manifests:
    """`<slurm folder>/manifests/<id>.json`: the task files of one sbatch, in array-index order."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder / "manifests"
        self._tasks: dict[str, list[str]] = {}

    def write(self, part: Sequence[Launch]) -> str:
        """A new manifest for `part` (written before sbatch); returns its id."""
        manifest = uuid.uuid4().hex[:8]
        study = part[0].study
        atomic_write_json(self.dir / f"{manifest}.json", {
            "study": study, "job_name": job_name(study, manifest), "tasks": [str(m.paths.task) for m in part],
            "attempts": [[m.point_id, m.attempt] for m in part]})
        return manifest

    def tasks(self, manifest: str) -> list[str]:
        if manifest not in self._tasks:
            try:
                data = json.loads((self.dir / f"{manifest}.json").read_text())
                self._tasks[manifest] = [str(t) for t in data["tasks"]]
            except (OSError, ValueError, KeyError, TypeError):
                self._tasks[manifest] = []  # another results folder's job of the same study name
        return self._tasks[manifest]


    def all_tasks(self) -> set[str]:
        try:
            ids = [p.stem for p in self.dir.glob("*.json")]
        except OSError:
            return set()
        return {task for manifest in ids for task in self.tasks(manifest)}


def recover_handles(manifests: Manifests, study: str, active: Sequence[Active],
                    runner: Runner = subprocess.run) -> list[tuple[Active, Handle]]:
    """Attempts submitted by a studyctl that died before recording job ids: find them by job name."""
    missing = {str(a.launch.paths.task): a for a in active if not a.handle.job_id}
    if not missing:
        return []
    found = []
    for job in find_jobs(study, runner=runner):
        tasks = manifests.tasks(job.manifest)
        index = job.array_index if job.array_index is not None else 0  # a one-point group is a plain job
        if index >= len(tasks) or (job.array_index is None and len(tasks) != 1):
            continue
        a = missing.pop(tasks[index], None)
        if a is not None:
            found.append((a, Handle(job_id=job.job_id, array_index=job.array_index)))
    return found
