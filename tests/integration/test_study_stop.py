"""Stopping a local study, for real processes: SIGTERM/SIGHUP like Ctrl-C, `sweep cancel` of the whole study,
stops as fast as the process allows, and a kill -9 between starting a worker and recording its PID.

The workers here are a stand-in mpiexec that logs each start and then hangs (the subprocess boundary): what is
tested is how studyctl supervises processes, which a real worker would only make slower.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studyctl import api
from studyctl.attempt.paths import StudyPaths
from studyctl.backends.local import KILL_GRACE_S, LocalBackend, pid_runs_task
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.states import State
from studyctl.study.launches import new_launch
from studyctl.study.ledger import Ledger
from studyctl.study.recorder import Recorder
from studyctl.study.store import sync_points

SWEEP = """\
study: s
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{zero_stage: {zero}, nodes: 1, ranks_per_node: 1}}
filesystems:
  scratch: {{path: {fs}}}
checkpoint: {{scale: 0.001, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4}}
local: {{max_concurrent: 1, timeout_s: {timeout}, mpiexec: {mpiexec}}}
estimate: {{overhead_s: 0}}  # a point of seconds: a short timeout is not refused up front
"""


def hung_study(tmp_path: Path, zero: str = "[1, 3]", timeout: int = 600,
               deaf: bool = False) -> tuple[Path, Path, Path]:
    """(sweep, results, start log): every start of the stand-in mpiexec appends its task file to the log.

    `deaf`: it ignores SIGTERM, so stopping it waits out the grace period and then kills it.
    """
    log = tmp_path / "starts.log"
    mpiexec = tmp_path / "hung-mpiexec"
    deafness = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if deaf else ""
    mpiexec.write_text(f"#!{sys.executable}\n{deafness}import sys, time\n"
                       f"open({str(log)!r}, 'a').write(sys.argv[-1] + '\\n')\ntime.sleep(300)\n")
    mpiexec.chmod(0o755)
    (tmp_path / "fs").mkdir()
    sweep = tmp_path / "s.yaml"
    sweep.write_text(SWEEP.format(zero=zero, fs=tmp_path / "fs", timeout=timeout, mpiexec=mpiexec))
    return sweep, tmp_path / "results", log


def attempts(results: Path) -> list[tuple[str, int, State, int | None, str | None]]:
    with Ledger(StudyPaths(results / "s").ledger) as ledger:
        return [(a.point_id, a.attempt, a.state, a.pid, a.reason) for a in ledger.attempts()]


def wait_for(predicate, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        time.sleep(0.05)


def running(results: Path) -> bool:
    try:
        return any(s is State.RUNNING and pid for _, _, s, pid, _ in attempts(results))
    except Exception:  # the ledger is being created
        return False


def start_submit(sweep: Path, results: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results",
                             str(results)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_a_local_submit_like_ctrl_c(tmp_path: Path, sig: signal.Signals) -> None:
    sweep, results, _ = hung_study(tmp_path)
    proc = start_submit(sweep, results)
    try:
        wait_for(lambda: running(results))
        (pid,) = [p for _, _, s, p, _ in attempts(results) if s is State.RUNNING]
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
        stopped_in = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, stderr
    assert f"stopped by {sig.name}" in stderr and "Traceback" not in stderr
    rows = {s: (point_id, r) for point_id, _, s, _, r in attempts(results)}
    assert rows.keys() == {State.CANCELLED, State.PLANNED}  # the queued point waits for the next submit
    assert rows[State.CANCELLED][1] == f"stopped by {sig.name}"
    task = StudyPaths(results / "s").attempt(rows[State.CANCELLED][0], 1).task
    assert not pid_runs_task(pid or 0, task)
    # as long as the process needs (a sleeping stand-in goes at once), not a fixed grace period
    assert stopped_in < KILL_GRACE_S, f"stopping took {stopped_in:.1f} s"


def test_a_second_ctrl_c_while_stopping_still_leaves_a_correct_ledger(tmp_path: Path) -> None:
    sweep, results, log = hung_study(tmp_path, zero="1", deaf=True)
    proc = start_submit(sweep, results)
    try:
        wait_for(lambda: running(results) and log.exists())
        ((point_id, _, _, pid, _),) = attempts(results)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)  # stopping: SIGTERM sent, the deaf worker still there
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    ((_, _, state, _, reason),) = attempts(results)
    assert state is State.CANCELLED and reason == "interrupted by the user (Ctrl-C)"
    wait_for(lambda: not pid_runs_task(pid or 0, StudyPaths(results / "s").attempt(point_id, 1).task), timeout=10)


def test_cancel_stops_the_whole_study_even_with_its_sweep_file_broken(tmp_path: Path) -> None:
    sweep, results, log = hung_study(tmp_path, zero="[0, 1, 2]")
    proc = start_submit(sweep, results)
    try:
        wait_for(lambda: running(results) and log.exists())  # the first point's process is up
        sweep.write_text("study: [unfinished\n")  # edited since: cancel works from the study's copy
        assert api.cancel("s", results) == 3
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM and "stopped by SIGTERM" in stderr, stderr
    assert [s for _, _, s, _, _ in attempts(results)] == [State.CANCELLED] * 3
    assert len(log.read_text().splitlines()) == 1  # the queued points never started
    wait_for(lambda: not any(pid_runs_task(p or 0, StudyPaths(results / "s").attempt(pid_, 1).task)
                             for pid_, _, _, p, _ in attempts(results)), timeout=10)


class _Died(Exception):
    """studyctl killed right after starting a worker, before its PID reached the ledger."""


def test_a_worker_started_before_its_pid_was_recorded_runs_once(tmp_path: Path) -> None:
    sweep_path, results, log = hung_study(tmp_path, zero="1", timeout=6)
    sweep = load_sweep(sweep_path)
    paths = StudyPaths((results / "s").resolve())
    backend = LocalBackend(sweep.local)
    started: list[int] = []

    def die(launch: object, handle: object) -> None:
        started.append(getattr(handle, "pid", 0))
        raise _Died

    with Ledger(paths.ledger) as ledger:
        paths.sweep_copy.write_text(sweep_path.read_text())
        ledger.set_meta(source_path=str(sweep_path.resolve()), study="s", backend="local")
        (pp,) = expand(sweep)
        sync_points(ledger, [pp])
        number = ledger.new_attempts([(pp.point.point_id, "local")], State.PLANNED)[pp.point.point_id]
        launch = new_launch(paths, sweep, backend, pp.point, number)
        with pytest.raises(_Died):
            backend.launch([launch], die, Recorder(paths, ledger, sweep).update)
    wait_for(lambda: log.exists())
    rep = api.submit(sweep_path, "local", results)  # finds the worker by its task file and adopts it
    assert rep.launched == 0 and rep.skipped_active == 1
    assert len(log.read_text().splitlines()) == 1  # never started twice
    ((_, attempt, state, pid, reason),) = attempts(results)
    assert (attempt, state, pid) == (1, State.TIMEOUT, started[0]) and "6 s" in (reason or "")
