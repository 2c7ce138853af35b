"""Real runs stopped every way a run stops leave no checkpoint or tier bytes once a later command has run.

Real mpiexec ranks of the real worker write a tiered point (shared storage and a node-local tier, two simulated
nodes) long enough to be stopped mid-run: by SIGTERM or SIGINT of the local submit, by its per-point TIMEOUT, by a
kill -9 of one rank, and by `sweep cancel` from another process. The stopping command itself cleans once the ranks
are gone; a later `status` finishes whatever it could not (and a run left behind with its marker is cleaned too).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from studyctl import api
from studyctl.attempt.paths import StudyPaths
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.states import State
from studyctl.study.ledger import Ledger
from tests.procs import pids_under

SWEEP = """\
study: stop
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1, strategy: tiered}}
filesystems:
  scratch: {{path: {fs}}}
  nodetier: {{path: {tier}, kind: local}}
checkpoint: {{scale: 0.01, writes: {writes}, reads: 1, buffer_mib: 4, block_mib: 4, tier: nodetier, tier_keep: 2}}
training: {{simulated_step: {{compute_s: 0.05}}}}
local: {{max_concurrent: 1, timeout_s: {timeout}}}
estimate: {{overhead_s: 0, GiBps_per_node: 1000}}  # seconds of I/O: the timeout is not refused up front
"""


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


def setup_study(tmp_path: Path, timeout: int = 600, writes: int = 400) -> tuple[Path, Path, Path, Path]:
    fs, tier = tmp_path / "fs", tmp_path / "tier"
    fs.mkdir()
    tier.mkdir()
    sweep = tmp_path / "stop.yaml"
    sweep.write_text(SWEEP.format(fs=fs, tier=tier, timeout=timeout, writes=writes))
    return sweep, tmp_path / "results", fs, tier


def start_submit(sweep: Path, results: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results",
                             str(results)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.05)


def writing(fs: Path, tier: Path) -> bool:
    """Checkpoint files in both places: the run is mid-way."""
    return bool(files_under(fs)) and bool(files_under(tier))


def ranks_of(results: Path, mpiexec_too: bool = False) -> list[int]:
    """PIDs of the worker ranks (each in its own session) running this study's attempt (and its mpiexec)."""
    return pids_under(results, lambda args: mpiexec_too or args[1:3] == [b"-m", b"worker"])


def states(results: Path) -> list[State]:
    with Ledger(StudyPaths(results / "stop").ledger) as ledger:
        return [a.state for a in ledger.attempts()]


def stopped_run(tmp_path: Path, stop: Callable[[subprocess.Popen[str], Path], None],
                timeout: int = 600, writes: int = 400) -> tuple[Path, Path, Path, subprocess.Popen[str]]:
    sweep, results, fs, tier = setup_study(tmp_path, timeout, writes)
    proc = start_submit(sweep, results)
    try:
        wait_for(lambda: writing(fs, tier))
        stop(proc, results)
        proc.communicate(timeout=120)
    finally:
        proc.kill()
    return results, fs, tier, proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_submit_leaves_no_bytes(tmp_path: Path, sig: signal.Signals) -> None:
    results, fs, tier, proc = stopped_run(tmp_path, lambda p, _: p.send_signal(sig))
    assert proc.returncode == 128 + sig
    assert states(results) == [State.CANCELLED]
    assert files_under(fs) == [] and files_under(tier) == [], "the stopped submit cleaned once its ranks were gone"
    assert StudyPaths(results / "stop").pending_cleanups() == []


def test_a_timeout_of_hung_ranks_leaves_no_bytes(tmp_path: Path) -> None:
    """The ranks hang mid-run (SIGSTOP: they can handle no signal) until the point's time limit: TIMEOUT; the
    estimate (simulated training of 14 writes: (3 + 14 × 7) steps × 0.05 s = 5.05 s) fits the 15 s limit, so
    submit accepts the point."""
    def hang(_: subprocess.Popen[str], results: Path) -> None:
        wait_for(lambda: len(ranks_of(results)) == 2)
        for pid in ranks_of(results):
            os.kill(pid, signal.SIGSTOP)

    results, fs, tier, proc = stopped_run(tmp_path, hang, timeout=15, writes=14)
    assert proc.returncode == 1, proc.stderr
    assert states(results) == [State.TIMEOUT]
    assert files_under(fs) == [] and files_under(tier) == []


def test_a_rank_killed_with_sigkill_leaves_no_bytes(tmp_path: Path) -> None:
    def kill_a_rank(_: subprocess.Popen[str], results: Path) -> None:
        wait_for(lambda: len(ranks_of(results)) == 2)
        os.kill(max(ranks_of(results)), signal.SIGKILL)

    results, fs, tier, _ = stopped_run(tmp_path, kill_a_rank)
    assert states(results) == [State.FAILED]
    assert files_under(fs) == [] and files_under(tier) == []


def test_cancel_of_a_tiered_point_leaves_no_bytes(tmp_path: Path) -> None:
    def cancel(_: subprocess.Popen[str], results: Path) -> None:
        assert api.cancel("stop", results) == 1
        # cancel itself waited for the ranks and cleaned: nothing left the moment it returns
        assert files_under(results.parent / "fs") == [] and files_under(results.parent / "tier") == []

    results, fs, tier, _ = stopped_run(tmp_path, cancel)
    assert states(results) == [State.CANCELLED]
    assert files_under(fs) == [] and files_under(tier) == []


def test_a_later_status_finishes_what_a_killed_submit_left(tmp_path: Path) -> None:
    """studyctl itself killed (-9) mid-run, then its ranks too: nothing cleaned then; the next status does."""
    def kill_everything(proc: subprocess.Popen[str], results: Path) -> None:
        proc.kill()
        proc.wait()
        for pid in ranks_of(results):
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not ranks_of(results, mpiexec_too=True), timeout=30)  # mpiexec sees them go, and ends

    results, fs, tier, _ = stopped_run(tmp_path, kill_everything)
    assert files_under(fs) and files_under(tier), "killed, no command cleaned yet"
    api.status("stop", results)
    assert states(results) == [State.LOST]
    assert files_under(fs) == [] and files_under(tier) == []
    assert StudyPaths(results / "stop").pending_cleanups() == []


def _node_dirs(tier: Path) -> set[str]:
    """The node folders of the tier: `<study>.<key>/<point>/<node>`."""
    return {d.name for d in tier.glob("*/*/*") if d.is_dir()}


def _mpi_rank(pid: int) -> int:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(v for v in environ if v.startswith(b"PMI_RANK=")).split(b"=", 1)[1])


def test_a_rank_told_to_stop_clears_its_tier_itself(tmp_path: Path) -> None:
    """SIGTERM to a rank, as slurmstepd sends at a time limit or scancel, with no studyctl after it: the rank
    removes its node's tier folder before it exits (the shared data, and the folder of a rank killed before it
    could run its handler, are studyctl's to remove once every rank is gone). One rank is signalled so that it
    surely gets back to Python to run its handler: a rank blocked in MPI whose peer has died may be killed by
    mpiexec first, the case the clean-up after the run covers (tests above)."""
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=2, ranks_per_node=1, filesystem="fs",
                  checkpoint=CheckpointOptions(scale=0.01, writes=2000, reads=1, buffer_mib=4, block_mib=4,
                                               strategy="tiered", tier="tier", tier_keep=2, step_s=0.05))
    fs, tier = tmp_path / "fs", tmp_path / "tier"
    fs.mkdir()
    tier.mkdir()
    task = WorkerTask(study="term", point_id=point.point_id, point=point, filesystem_path=str(fs),
                      data_key="k", result_path=str(tmp_path / "result.json"), error_path=str(tmp_path / "e.json"),
                      tier_path=str(tier))
    task_file = tmp_path / "task.json"
    task_file.write_text(task.model_dump_json())
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    proc = subprocess.Popen([mpiexec, "-n", "2", sys.executable, "-m", "worker", str(task_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: writing(fs, tier) and len(ranks_of(tmp_path)) == 2 and len(_node_dirs(tier)) == 2)
        told = next(pid for pid in ranks_of(tmp_path) if _mpi_rank(pid) == 1)
        os.kill(told, signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    left = _node_dirs(tier)
    assert not any(name.endswith("-1") for name in left), f"rank 1's node folder is gone: {left}"
    assert files_under(fs), "shared storage is left to studyctl's clean-up (it knows when every rank is gone)"

CRASH_ON_RANK_1 = """
import sys
from mpi4py import MPI
import worker.strategies as strategies

real, calls = strategies.write_files, []
def crashing(*args, **kwargs):
    calls.append(1)
    if MPI.COMM_WORLD.Get_rank() == 1 and len(calls) == 3:
        raise RuntimeError("injected bug")
    return real(*args, **kwargs)
strategies.write_files = crashing
import worker.run as run
run.run_task(sys.argv[1])
"""


def test_a_worker_crash_leaves_no_tier_folder(tmp_path: Path) -> None:
    """A bug on one rank mid-run (its tier already written twice): that rank removes its own node's tier folder
    (and the shared data it can) before it aborts the job. The abort kills the other ranks outright (SIGKILL), so
    another node's folder is left for studyctl, which removes it once the ranks are gone (the kill -9 test above)."""
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=2, ranks_per_node=1, filesystem="fs",
                  checkpoint=CheckpointOptions(scale=0.01, writes=5, reads=1, buffer_mib=4, block_mib=4,
                                               strategy="tiered", tier="tier", tier_keep=2, step_s=0.05))
    fs, tier = tmp_path / "fs", tmp_path / "tier"
    fs.mkdir()
    tier.mkdir()
    task = WorkerTask(study="crash", point_id=point.point_id, point=point, filesystem_path=str(fs), data_key="k",
                      result_path=str(tmp_path / "result.json"), error_path=str(tmp_path / "error.json"),
                      tier_path=str(tier))
    task_file = tmp_path / "task.json"
    task_file.write_text(task.model_dump_json())
    script = tmp_path / "crash.py"
    script.write_text(CRASH_ON_RANK_1)
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    proc = subprocess.run([mpiexec, "-n", "2", sys.executable, str(script), str(task_file)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parent.parent.parent)
    assert proc.returncode != 0 and "injected bug" in (tmp_path / "error.json").read_text()
    point_tier = tier / "crash.k" / point.point_id
    assert not (point_tier / f"{os.uname().nodename}-1").exists(), "the crashing rank removed its node's folder"
    assert files_under(point_tier / f"{os.uname().nodename}-0"), "killed by the abort: studyctl's to remove"
    # the shared data: removed by the crashing rank, but rank 0 may still finish a file before the abort kills
    # it (a race the worker cannot close); studyctl's clean-up after the run removes that (tests above)
