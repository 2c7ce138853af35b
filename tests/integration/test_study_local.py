"""Studies on the local backend, with real mpiexec workers: failure, resubmit, kill -9, timeout, status."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studyctl import api as study
from studyctl.attempt.paths import StudyPaths
from studyctl.backends.local import pid_runs_task
from studyctl.states import State
from studyctl.study.ledger import Ledger
from tests.tmpfs import small_tmpfs

# A GPT-2 layout scaled to ~5 MiB per checkpoint: real files and ranks, about a second per point.
SWEEP = """\
study: {name}
ceilings: off
models: [gpt2-125m]
matrix:
  zero_stage: {zero}
  nodes: 1
  ranks_per_node: 2
  filesystem: {filesystems}
filesystems:
  good: {{path: {good}}}
  other: {{path: {other}}}
repetitions: {reps}
checkpoint: {{scale: {scale}, writes: {writes}, reads: 2, buffer_mib: 4, block_mib: 4}}
local: {{max_concurrent: 1, timeout_s: {timeout}}}
estimate: {{overhead_s: 0, GiBps_per_node: 1000}}  # these points take seconds: a short timeout is not refused
calibration: {{enabled: false}}  # counts of points below are the measure points
"""


def make_sweep(tmp_path: Path, name: str = "s", zero: str = "[1, 3]", filesystems: str = "[good, other]",
               other: Path | None = None, reps: int = 1, scale: float = 0.002, writes: int = 2,
               timeout: int = 120) -> Path:
    good = tmp_path / "fs-good"
    good.mkdir(exist_ok=True)
    if other is None:
        other = tmp_path / "fs-other"
        other.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(SWEEP.format(name=name, zero=zero, filesystems=filesystems, good=good, other=other, reps=reps,
                                 scale=scale, writes=writes, timeout=timeout))
    return path


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studyctl.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def ledger_rows(results: Path, name: str) -> dict[str, list]:
    with Ledger(results / name / "ledger.sqlite") as ledger:
        out: dict[str, list] = {}
        for a in ledger.attempts():
            out.setdefault(a.point_id, []).append(a)
        return out


def test_submit_runs_every_point_and_is_idempotent(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    results = tmp_path / "results"
    rep = study.submit(sweep, "local", results)
    assert rep.launched == 4
    status = study.status("s", results)
    assert status.counts == {"COMPLETED": 4}
    for p in status.points:
        result = Path(p.latest.result_path)
        data = json.loads(result.read_text())
        assert data["point_id"] == p.point_id and data["provenance"]["world_size"] == 2
    # nothing left on the filesystems but the (empty) study directories
    assert not [f for f in (tmp_path / "fs-good").rglob("*") if f.is_file()]
    again = study.submit(sweep, "local", results)
    assert again.launched == 0 and again.skipped_completed == 4
    assert all(len(v) == 1 for v in ledger_rows(results, "s").values())


def test_failed_point_then_fixed_path_and_resubmit(tmp_path: Path) -> None:
    # unwritable, yet there with room: a read-only mount (a path that does not exist is refused up front)
    with small_tmpfs(tmp_path, "16m", readonly=True, name="read-only") as blocker:
        sweep = make_sweep(tmp_path, other=blocker)
        results = tmp_path / "results"
        study.submit(sweep, "local", results)
    status = study.status("s", results)
    assert status.counts == {"COMPLETED": 2, "FAILED": 2}
    failed = [p for p in status.points if p.state is State.FAILED]
    for p in failed:
        assert p.point.filesystem == "other"
        assert p.latest.reason and str(blocker) in p.latest.reason
    completed_before = {p.point_id: Path(p.latest.result_path).stat().st_mtime_ns
                        for p in status.points if p.state is State.COMPLETED}

    # CLI shows the failure and how to rerun it
    proc = cli("sweep", "status", "s", "--results", str(results), "--json", cwd=tmp_path)
    data = json.loads(proc.stdout)
    assert data["counts"] == {"COMPLETED": 2, "FAILED": 2}

    fixed = tmp_path / "fs-fixed"
    fixed.mkdir()
    sweep.write_text(sweep.read_text().replace(str(blocker), str(fixed)))
    proc = cli("sweep", "resubmit", "s", "--results", str(results), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    status = study.status("s", results)
    assert status.counts == {"COMPLETED": 4}
    attempts = ledger_rows(results, "s")
    for p in failed:
        assert [(a.attempt, a.state) for a in attempts[p.point_id]] == [(1, State.FAILED), (2, State.COMPLETED)]
    for pid, mtime in completed_before.items():
        assert len(attempts[pid]) == 1
        assert Path(attempts[pid][0].result_path).stat().st_mtime_ns == mtime


def test_timeout_gives_timeout_and_cleans_up(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, zero="1", filesystems="[good]", scale=0.05, writes=200, timeout=3)
    results = tmp_path / "results"
    t0 = time.monotonic()
    study.submit(sweep, "local", results)
    assert time.monotonic() - t0 < 60
    status = study.status("s", results)
    assert status.counts == {"TIMEOUT": 1}
    attempt = status.points[0].latest
    assert attempt.failure_class == "timeout" and "3 s" in attempt.reason
    assert not [f for f in (tmp_path / "fs-good").rglob("*") if f.is_file()]


def _wait_for(predicate, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def _started_runs(results: Path, name: str) -> int:
    """Attempts RUNNING with the PID of their mpiexec recorded."""
    if not (results / name / "ledger.sqlite").exists():
        return 0
    try:
        rows = [a for rows in ledger_rows(results, name).values() for a in rows]
    except sqlite3.Error:
        return 0
    return sum(a.state.value == "RUNNING" and a.pid is not None for a in rows)


def _states(results: Path, name: str) -> list[str]:
    path = results / name / "ledger.sqlite"
    if not path.exists():
        return []
    try:
        with Ledger(path) as ledger:
            return [p.state.value for p in ledger.points()]
    except sqlite3.Error:
        return []


def test_kill_9_mid_run_then_submit_again(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, zero="[0, 1, 2, 3]", filesystems="[good]", scale=0.01, writes=6)
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results",
                             str(results)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # killed once a run has really started (its PID recorded): killed between recording RUNNING and starting
        # mpiexec, that attempt never ran, and running it again would be right
        _wait_for(lambda: "COMPLETED" in _states(results, "s") and _started_runs(results, "s"))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    before = _states(results, "s")
    assert "RUNNING" in before and "PLANNED" in before
    rep = study.submit(sweep, "local", results)
    status = study.status("s", results)
    assert status.counts == {"COMPLETED": 4}
    attempts = ledger_rows(results, "s")
    # nothing ran twice: the orphaned run was waited for, not restarted
    assert all(len(v) == 1 for v in attempts.values()), attempts
    assert rep.launched == before.count("PLANNED")
    for rows in attempts.values():
        assert Path(rows[0].result_path).is_file()


def test_status_during_a_run_does_not_corrupt(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, zero="[0, 1, 2, 3]", filesystems="[good, other]", scale=0.005)
    results = tmp_path / "results"
    runner = subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results",
                               str(results)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    _wait_for(lambda: (results / "s" / "ledger.sqlite").exists())
    seen = []
    while runner.poll() is None:
        pair = [subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "status", "s", "--results",
                                  str(results), "--json"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
        for p in pair:
            stdout, _ = p.communicate(timeout=60)
            assert p.returncode == 0
            seen.append(json.loads(stdout)["counts"])
    assert runner.returncode == 0, runner.stderr.read()
    assert len(seen) >= 2
    with sqlite3.connect(results / "s" / "ledger.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert study.status("s", results).counts == {"COMPLETED": 8}


def test_unknown_study_is_a_one_line_error(tmp_path: Path) -> None:
    proc = cli("sweep", "status", "nope", "--results", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "no study 'nope'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["sweep", "resubmit", "s", "--state", "BROKEN"],
                                  ["sweep", "submit", "x.yaml", "--backend", "pbs"]])
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str]) -> None:
    make_sweep(tmp_path, name="x")
    proc = cli(*args, "--results", str(tmp_path / "results"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_an_adopted_hung_worker_keeps_its_time_limit(tmp_path: Path) -> None:
    """Bug: a run adopted after studyctl was killed had no time limit, so a hung worker blocked submit forever.

    The hang is a stand-in mpiexec that sleeps (the subprocess boundary); the limit counts from its start.
    """
    hung = tmp_path / "hung-mpiexec"
    hung.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(150)\n")
    hung.chmod(0o755)
    sweep = make_sweep(tmp_path, zero="1", filesystems="[good]", timeout=10)
    sweep.write_text(sweep.read_text().replace("timeout_s: 10}", f"timeout_s: 10, mpiexec: {hung}}}"))
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results",
                             str(results)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _states(results, "s") == ["RUNNING"])
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (orphan,) = ledger_rows(results, "s").values()
    task = StudyPaths(results / "s").attempt(orphan[0].point_id, 1).task
    assert orphan[0].pid and pid_runs_task(orphan[0].pid, task)
    t0 = time.monotonic()
    rep = study.submit(sweep, "local", results)
    waited = time.monotonic() - t0
    assert rep.launched == 0 and rep.skipped_active == 1
    (attempt,) = next(iter(ledger_rows(results, "s").values()))
    assert attempt.state is State.TIMEOUT and "10 s" in (attempt.reason or "")
    assert waited < 60, f"waited {waited:.0f} s for an adopted run with a 10 s limit"
    assert not pid_runs_task(orphan[0].pid, task)  # its process group was ended
