"""A recovery point's two launches: the writing world, then a new launch of the restart world after a failure.

`python -m worker.relaunch TASK.json mpiexec MPIEXEC [ARGS...]` (the local backend) runs
`MPIEXEC ARGS -n OLD python -m worker TASK` and then `MPIEXEC ARGS -n NEW python -m worker.restart TASK`;
under Slurm `relaunch_srun` runs once in the batch script (submitit without srun) of an allocation sized for the
larger world and starts each world as its own job step (`srun -N NODES -n RANKS`). Right before the restart's
launcher is invoked it stamps the wall clock into STUDYCTL_LAUNCH_T0: the restart's launch phase runs from there
until every rank has passed MPI init. The writing world leaves its result beside the final one
(`definition.checkpoint.recovery.before_restart_path`); the restart adds its timing and writes the point's result.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.checkpoint.recovery import LAUNCH_T0_ENV, before_restart_path, restart_world
from studyctl.fsutil import atomic_write_text

LAUNCH_HOST_ENV = "STUDYCTL_LAUNCH_HOST"  # the launcher's host: the restart says whether it shared its clock
LAUNCHERS = ("mpiexec", "srun")


def writing_task(task_path: Path) -> tuple[WorkerTask, Path]:
    """The point's task, and a copy of it (beside it) whose result goes where the restart finds it."""
    task = WorkerTask.model_validate_json(task_path.read_text())
    copy = Path(before_restart_path(str(task_path)))
    written = task.model_copy(update={"result_path": before_restart_path(task.result_path)})
    atomic_write_text(copy, written.model_dump_json(indent=1))
    return task, copy


def world_command(launcher: str, prefix: list[str], ranks: int, ranks_per_node: int) -> list[str]:
    """The launcher's arguments for one world of `ranks` ranks, `ranks_per_node` to a node."""
    if launcher == "srun":
        return [*prefix, "-N", str(-(-ranks // ranks_per_node)), "-n", str(ranks),
                f"--ntasks-per-node={ranks_per_node}"]
    return [*prefix, "-n", str(ranks)]


def relaunch(task_path: str, launcher: str, prefix: list[str]) -> int:
    """Both worlds, one after the other; the first failure's exit code (the worlds record their own errors)."""
    path = Path(task_path)
    task, copy = writing_task(path)
    point = task.point
    assert point.recovery is not None, "a relaunch is for recovery points"
    python = [sys.executable, "-m"]
    code = subprocess.call([*world_command(launcher, prefix, point.world_size, point.ranks_per_node),
                            *python, "worker", str(copy)])
    if code != 0:
        return code
    new = world_command(launcher, prefix, restart_world(point.world_size, point.recovery), point.ranks_per_node)
    env = {**os.environ, LAUNCH_HOST_ENV: socket.gethostname()}
    env[LAUNCH_T0_ENV] = repr(time.time())  # the last thing before the launcher starts
    code = subprocess.call([*new, *python, "worker.restart", str(path)], env=env)
    copy.unlink(missing_ok=True)
    return code


def relaunch_srun(task_path: str, srun_args: list[str]) -> None:
    """submitit's entry for a recovery point (run once, not under srun): both worlds as job steps."""
    code = relaunch(task_path, "srun", ["srun", *srun_args])
    if code != 0:
        raise RuntimeError(f"studyctl relaunch: a world exited with code {code} (its error record says why)")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in LAUNCHERS:
        print("usage: python -m worker.relaunch TASK.json mpiexec|srun LAUNCHER [ARGS...]", file=sys.stderr)
        return 2
    return relaunch(argv[0], argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
