"""The clean-up job: a node-local place (a tier) of an ended attempt, removed on each node it ran on.

A job killed by TIMEOUT, scancel or a node's fault cannot clean its tier, and only its own nodes reach it:
one small job per attempt runs `python -m worker.tidy` once on each of them (`--nodelist` from sacct).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from studyctl.backends.slurm.sacct import Runner
from studyctl.definition.checkpoint.places import Place
from studyctl.definition.inputs.options import SlurmOptions

CLEANUP_MINUTES = 5


def node_names(node_list: str, runner: Runner) -> list[str]:
    """Slurm's hostlist ("n[1-2]") as names, by `scontrol show hostnames`; [] if it cannot say."""
    try:
        out = runner(["scontrol", "show", "hostnames", node_list], capture_output=True, text=True, timeout=60,
                     check=False)
    except OSError:
        return []
    return out.stdout.split() if out.returncode == 0 else []


def cleanup_job_name(study: str) -> str:
    """Not `studyctl-<study>-...`: no study's job search (discovery.find_jobs) ever takes it for a point's job."""
    return f"studyctl_tidy_{study}"


def cleanup_command(options: SlurmOptions, folder: Path, place: Place, nodes: list[str], study: str) -> list[str]:
    python = options.python or shlex.quote(sys.executable)
    tidy = " ".join([python, "-m", "worker.tidy", *map(shlex.quote, (place.root, place.study_dir, place.point_id))])
    args = ["sbatch", "--parsable", f"--job-name={cleanup_job_name(study)}", f"--nodelist={','.join(nodes)}",
            f"--nodes={len(nodes)}", "--ntasks-per-node=1", f"--time={CLEANUP_MINUTES}",
            f"--output={folder / 'cleanup-%j.out'}", f"--chdir={folder}"]
    args += [f"--{key}={getattr(options, key)}" for key in ("partition", "account", "qos") if getattr(options, key)]
    return [*args, "--wrap", f"srun --mpi=none --ntasks-per-node=1 {tidy}"]


def submit_cleanup(options: SlurmOptions, folder: Path, place: Place, node_list: str | None, runner: Runner) -> bool:
    """Hand the removal of `place` to a job on its nodes; True once sbatch took it (or no node ever ran it)."""
    if not node_list:
        return True  # never started on a node: nothing was written there
    nodes = node_names(node_list, runner)
    if not nodes:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    try:
        out = runner(cleanup_command(options, folder, place, nodes, place.study_dir.rsplit(".", 1)[0]),
                     capture_output=True, text=True, timeout=120, check=False)
    except OSError:
        return False
    return out.returncode == 0
