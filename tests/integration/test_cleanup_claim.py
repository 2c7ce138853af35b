"""Whether an ended attempt's ranks are gone is judged by the point's claim, not by the process table alone.

A rank's command line vanishes from /proc when its exit releases its memory, before the exit closes its files,
the claim's lock among them (with large buffers, under load, long enough to be seen). The stand-in mpiexec (the
subprocess boundary) writes the point's data, takes its claim as rank 0 does, and leaves the lock held by a
process whose command line names no task, for a moment after everything that names the task is gone: the
command that saw the attempt end removes its data all the same, without waiting for a later command.
"""

from __future__ import annotations

import sys
from pathlib import Path

from studyctl import api
from studyctl.attempt.paths import StudyPaths

SWEEP = """\
study: exiting
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{nodes: 1, ranks_per_node: 1}}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: 0.001, writes: 1, reads: 0}}
local: {{mpiexec: {mpiexec}}}
"""

# Writes the point's data under its claim, then dies; the lock outlives it for HOLD_S in a process whose
# command line does not name the task (as an exiting rank's lock outlives its command line).
STAND_IN = """\
import fcntl, os, subprocess, sys
from pathlib import Path
from studyctl.definition.checkpoint.points import WorkerTask
task = WorkerTask.model_validate_json(Path(sys.argv[-1]).read_text())
task.claim_file.parent.mkdir(parents=True, exist_ok=True)
fd = os.open(task.claim_file, os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
step = task.data_dir / "global_step1"
step.mkdir(parents=True)
(step / "model.pt").write_bytes(b"c" * 4096)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep({hold_s})"], pass_fds=(fd,),
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sys.exit(137)
"""
HOLD_S = 1.5


def test_a_claim_held_past_the_ranks_command_lines_is_waited_for(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    mpiexec = tmp_path / "mpiexec"
    mpiexec.write_text(f"#!{sys.executable}\n{STAND_IN.replace('{hold_s}', str(HOLD_S))}")
    mpiexec.chmod(0o755)
    sweep = tmp_path / "exiting.yaml"
    sweep.write_text(SWEEP.format(fs=fs, mpiexec=mpiexec))
    results = tmp_path / "results"
    api.submit(sweep, "local", results)
    assert [p for p in fs.rglob("*")] == [], "the data and its claim file are gone when submit returns"
    assert StudyPaths(results / "exiting").pending_cleanups() == []
