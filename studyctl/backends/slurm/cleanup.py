"""The clean-up job: a node-local place (a tier) of an ended attempt, removed on each node it ran on.

A job killed by TIMEOUT, scancel or a node's fault cannot clean its tier, and only its own nodes reach it:
one small job per attempt runs `python -m worker.tidy` once on each of them (`--nodelist` from sacct).
The place counts as clean only once that job COMPLETED: its id is recorded (`tidy/` in the backend's folder),
a later command reads its end from accounting, and one that failed, was cancelled or timed out is submitted
again. Handing the job to sbatch proves nothing: it can pend, fail on a node, or be cancelled by anyone.
"""

from __future__ import annotations

import contextlib
import hashlib
import shlex
import subprocess
import sys
from pathlib import Path

from studyctl.backends.slurm.sacct import Runner
from studyctl.definition.checkpoint.places import Place
from studyctl.definition.inputs.options import SlurmOptions
from studyctl.fsutil import atomic_write_text

CLEANUP_MINUTES = 5


def node_names(node_list: str, runner: Runner) -> list[str]:
    """Slurm's hostlist ("n[1-2]") as names, by `scontrol show hostnames`; [] if it cannot say."""
    try:
        out = runner(["scontrol", "show", "hostnames", node_list], capture_output=True, text=True, timeout=60,
                     check=False)
    except (OSError, subprocess.SubprocessError):  # not found, or no answer in time
        return []
    return out.stdout.split() if out.returncode == 0 else []


def cleanup_job_name(study: str) -> str:
    """Not `studyctl-<study>-...`: no study's job search (discovery.find_jobs) ever takes it for a point's job."""
    return f"studyctl_tidy_{study}"


def cleanup_command(options: SlurmOptions, folder: Path, place: Place, nodes: list[str], study: str,
                    after: str | None = None) -> list[str]:
    """`after`: the attempt's job, which must have ended on every node (COMPLETING over) before the job starts:
    a rank still writing its tier after accounting calls its job ended would otherwise write behind it."""
    python = options.python or shlex.quote(sys.executable)
    tidy = " ".join([python, "-m", "worker.tidy", *map(shlex.quote, (place.root, place.study_dir, place.point_id))])
    args = ["sbatch", "--parsable", f"--job-name={cleanup_job_name(study)}", f"--nodelist={','.join(nodes)}",
            f"--nodes={len(nodes)}", "--ntasks-per-node=1", f"--time={CLEANUP_MINUTES}",
            f"--output={folder / 'cleanup-%j.out'}", f"--chdir={folder}"]
    args += [f"--{key}={getattr(options, key)}" for key in ("partition", "account", "qos") if getattr(options, key)]
    args += [f"--dependency=afterany:{after}"] if after else []
    return [*args, "--wrap", f"srun --mpi=none --ntasks-per-node=1 {tidy}"]


def submit_cleanup(options: SlurmOptions, folder: Path, place: Place, nodes: list[str], runner: Runner,
                   after: str | None = None) -> str | None:
    """Hand the removal of `place` on `nodes` to a job; its id, or None if sbatch did not take it."""
    folder.mkdir(parents=True, exist_ok=True)
    study = place.study_dir.rsplit(".", 1)[0]
    # a Slurm that refuses a dependency on a job it already forgot (gone long ago: nothing of it runs) gets none
    for dependency in dict.fromkeys([after, None]):
        try:
            out = runner(cleanup_command(options, folder, place, nodes, study, dependency),
                         capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        job_id = out.stdout.strip().split(";")[0] if out.returncode == 0 else ""
        if job_id or "dependency" not in out.stderr.lower():
            return job_id or None
    return None


class TidyRecords:
    """The clean-up job handed out for each (ended attempt's job, node-local place), one small file each."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder / "tidy"

    def path(self, job_id: str | None, place: Place) -> Path:
        digest = hashlib.sha256(str(place.path).encode()).hexdigest()[:16]
        return self.dir / f"{job_id or 'unsubmitted'}.{digest}"

    def read(self, job_id: str | None, place: Place) -> str | None:
        try:
            return self.path(job_id, place).read_text().strip() or None
        except OSError:
            return None

    def write(self, job_id: str | None, place: Place, tidy_id: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path(job_id, place), tidy_id + "\n")

    def forget(self, job_id: str | None, place: Place) -> None:
        with contextlib.suppress(OSError):
            self.path(job_id, place).unlink()

    def all_ids(self) -> list[str]:
        """Every clean-up job still recorded: asked about in the same sacct call as the attempts' own jobs."""
        try:
            files = [p for p in self.dir.iterdir() if p.is_file()]
        except OSError:
            return []
        ids = []
        for path in files:
            with contextlib.suppress(OSError):
                ids.append(path.read_text().strip())
        return [i for i in ids if i]
