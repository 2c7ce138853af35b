"""A hung TIMEOUT under load leaves nothing: `python -m benchmarks hung_timeout [N [LIMIT_S]]` (N runs, default 20).

Each run: a local study of 2 simulated nodes × 1 rank with 256 MiB buffers and `local.timeout_s: LIMIT_S`
(default 6; a machine so busy that the ranks' first files come later needs more); once both
ranks have written their first file they are SIGSTOPped (they can act on no signal), so the point ends by its time
limit and studyctl kills them. Meanwhile 3 busy-loop processes load the machine, so a killed rank takes its time
to exit (releasing 256 MiB). Counted: runs after which anything (a checkpoint file, the claim lock) is left under
the filesystem the point wrote, and runs not recorded TIMEOUT. Target: 0 of N left anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.study.ledger import Ledger
from tests.procs import pids_under

SWEEP = """\
study: hung
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1}}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: 0.02, writes: 20, reads: 1, buffer_mib: 256, block_mib: 4}}
training: {{simulated_step: {{compute_s: 0.01}}}}
local: {{max_concurrent: 1, timeout_s: {limit_s}}}
estimate: {{overhead_s: 0, GiBps_per_node: 1000}}  # the timeout is not refused up front
"""
LOAD_PROCESSES = 3


def _ranks(root: Path) -> list[int]:
    """PIDs of the worker ranks whose command line names a path under `root`."""
    return pids_under(root, lambda args: args[1:3] == [b"-m", b"worker"])


def _files(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if not p.is_dir()]


def one_run(tmp: Path, limit_s: int) -> tuple[bool, str]:
    """(anything left, the state recorded) for one hung run in `tmp`."""
    fs = tmp / "fs"
    fs.mkdir()
    sweep = tmp / "hung.yaml"
    sweep.write_text(SWEEP.format(fs=fs, limit_s=limit_s))
    results = tmp / "results"
    proc = subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results",
                             str(results)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 120
        while not (len(ranks := _ranks(results)) == 2 and len([p for p in _files(fs) if p.suffix != ".lock"]) >= 2):
            if time.monotonic() > end or proc.poll() is not None:
                raise RuntimeError("the run ended or stalled before its first files: raise LIMIT_S")
            time.sleep(0.02)
        for pid in ranks:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    with Ledger(StudyPaths(results / "hung").ledger, readonly=True) as ledger:
        state = ",".join(a.state.value for a in ledger.attempts())
    return bool(_files(fs)), state


def _stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM too ends the busy loops (below)


def main(runs: int, limit_s: int = 6) -> None:
    signal.signal(signal.SIGTERM, _stop)
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(LOAD_PROCESSES)]
    left, states = 0, []
    try:
        for n in range(runs):
            with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
                dirty, state = one_run(Path(tmp), limit_s)
            left += dirty
            states.append(state)
            print(f"run {n + 1}: {state}{', LEFT FILES' if dirty else ''}", flush=True)
    finally:
        for p in load:
            p.kill()
            p.wait()
    timeouts = sum(s == "TIMEOUT" for s in states)
    print(f"hung TIMEOUT (limit {limit_s} s) under load ({LOAD_PROCESSES} busy loops): {left} of {runs} runs "
          f"left files; {timeouts} of {runs} recorded TIMEOUT")
