"""Clean-up on the real local Slurm cluster: a tiered point stopped mid-run (scancel through `sweep cancel`, or
its time limit) leaves no bytes on shared storage nor on any node's own TmpFS once later commands have run; the
node-local part is removed by a clean-up job on the attempt's own nodes (`python -m worker.tidy`)."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from studyctl.attempt.paths import StudyPaths
from studyctl.backends.slurm.cleanup import cleanup_job_name
from studyctl.definition.checkpoint.points import data_key
from tests.procs import pids_under
from tests.slurm.test_slurm import cli, diag, wait_final
from tests.slurm.test_slurm_strategies import tmpfs_pattern

pytestmark = pytest.mark.slurm

SWEEP = """\
study: {name}
models: [gpt2-125m]
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1, strategy: tiered}}
filesystems:
  shared: {{path: {fs}}}
  nodetmp: {{path: "{tier}", kind: local}}
checkpoint: {{scale: 0.01, writes: {writes}, reads: 1, buffer_mib: 4, block_mib: 4, tier: nodetmp, tier_keep: 2}}
training: {{simulated_step: {{compute_s: 0.05}}}}
slurm: {{partition: debug, time_limit_min: {minutes}}}
calibration: {{enabled: false}}
estimate: {{overhead_s: 0, GiBps_per_node: 1000}}  # seconds of I/O: the limit is not refused up front
ceilings: off
"""


def ranks_of(results: Path) -> list[int]:
    """PIDs of the Slurm tasks (submitit runs the worker in each: `python -u -m submitit.core._submit <folder>`,
    the folder inside this study) on the cluster's nodes, all of them on this machine."""
    return pids_under(results, lambda args: Path(args[0].decode()).name.startswith("python")
                      and b"submitit.core._submit" in args)


def tier_files(tier: str, study_dir: Path) -> list[str]:
    """Files of this study (its name and key) on every node's TmpFS."""
    pattern = f"{tier.replace('{node}', '*')}/{study_dir.name}.{data_key(study_dir)}/**"
    return [f for f in glob.glob(pattern, recursive=True) if Path(f).is_file()]


def shared_files(fs: Path) -> list[Path]:
    return [p for p in fs.rglob("*") if p.is_file()]


def cleanup_jobs(study: str) -> str:
    """The study's clean-up jobs still queued or running; a squeue that failed (a busy slurmctld) says so
    rather than "none"."""
    proc = subprocess.run(["squeue", "-h", "-n", cleanup_job_name(study), "-o", "%i"], capture_output=True,
                          text=True)
    return proc.stdout.strip() if proc.returncode == 0 else f"unknown: {proc.stderr.strip()}"


def cleanup_outputs(tmp_path: Path, name: str) -> str:
    folder = StudyPaths(tmp_path / "results" / name).slurm
    return "".join(f"\n{p.name}: {p.read_text()}" for p in folder.glob("cleanup-*"))


def stopped_tiered_point(tmp_path: Path, name: str, minutes: int, writes: int = 800) -> tuple[str, Path]:
    tier = tmpfs_pattern()
    fs = tmp_path / "fs"
    fs.mkdir()
    sweep = tmp_path / f"{name}.yaml"
    sweep.write_text(SWEEP.format(name=name, fs=fs, tier=tier, minutes=minutes, writes=writes))
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    end = time.monotonic() + 180
    study_dir = tmp_path / "results" / name
    next_status = 0.0
    # Files are polled every 0.1 s (no subprocess), `status` only every 5 s: under load a `status` takes
    # seconds, and the caller must act while the point still runs (it lasts ~35 s after its first write).
    while not (shared_files(fs) and len({Path(f).parts[:5] for f in tier_files(tier, study_dir)}) >= 2):
        if time.monotonic() >= next_status:
            status = cli(tmp_path, "sweep", "status", name, "--json").stdout
            assert time.monotonic() < end and '"FAILED"' not in status, \
                f"the point never wrote on both nodes: {status}"
            next_status = time.monotonic() + 5.0
        time.sleep(0.1)
    return tier, fs


def wait_clean(tmp_path: Path, name: str, tier: str, fs: Path, timeout: float = 180) -> None:
    """`status` until the study has nothing left to clean and its clean-up jobs have run."""
    paths = StudyPaths(tmp_path / "results" / name)
    end = time.monotonic() + timeout
    while paths.pending_cleanups() or cleanup_jobs(name):
        assert time.monotonic() < end, f"still to clean: {paths.pending_cleanups()}" + diag(tmp_path, name)
        assert cli(tmp_path, "sweep", "status", name).returncode == 0
        time.sleep(1.0)
    assert shared_files(fs) == []
    assert tier_files(tier, tmp_path / 'results' / name) == [], \
        "the clean-up job removed the tier on every node" + cleanup_outputs(tmp_path, name)


@contextlib.contextmanager
def held_stopped(pids: list[int]) -> Iterator[None]:
    """Keeps the processes stopped until they are gone. At the time limit Slurm sends SIGCONT and SIGTERM, and
    submitit's handler lets SIGTERM pass, so a rank stopped only once would run on for KillWait (5 s here) and
    could finish a point that had little left: a rank hung in storage stays hung until SIGKILL."""
    done = threading.Event()
    handles = [os.pidfd_open(pid) for pid in pids]  # a pidfd never signals a later process given the same PID

    def stop_all() -> None:
        for handle in list(handles):
            try:
                signal.pidfd_send_signal(handle, signal.SIGSTOP)
            except ProcessLookupError:
                handles.remove(handle)
                os.close(handle)

    def stop_again() -> None:
        while handles and not done.is_set():
            stop_all()
            time.sleep(0.01)

    stop_all()
    thread = threading.Thread(target=stop_again, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        for handle in handles:
            os.close(handle)


def test_a_cancelled_tiered_point_leaves_nothing_on_any_node(tmp_path: Path) -> None:
    tier, fs = stopped_tiered_point(tmp_path, "tidyc", minutes=5)
    proc = cli(tmp_path, "sweep", "cancel", "tidyc")
    assert proc.returncode == 0, proc.stderr
    data = wait_final(tmp_path, "tidyc", timeout=60)
    assert data["counts"] == {"CANCELLED": 1}
    wait_clean(tmp_path, "tidyc", tier, fs)


def test_a_timed_out_tiered_point_leaves_nothing_on_any_node(tmp_path: Path) -> None:
    """Its ranks hang mid-run until the job's 1-min limit kills them: ranks stuck in storage that never answers.
    The estimate (simulated training of 100 writes, 703 steps of 0.05 s: 35 s) fits the limit, so submit accepts
    the point."""
    tier, fs = stopped_tiered_point(tmp_path, "tidyt", minutes=1, writes=100)
    ranks = ranks_of(tmp_path / "results")
    assert len(ranks) == 2, ranks
    with held_stopped(ranks):
        assert not list((tmp_path / "results" / "tidyt").rglob("result.json")), \
            "the point ended before its ranks hung"
        data = wait_final(tmp_path, "tidyt", timeout=200)
    # submitit's warning signal before the limit ends the run in the worker (worker_crash, "timed-out and not
    # checkpointable") unless the limit itself comes first (TIMEOUT): either way the limit stopped it mid-run
    (point,) = data["points"]
    # the limit stopped it mid-run: TIMEOUT, or a worker_crash where submitit's warning signal or the limit's
    # SIGTERM reached the worker first (its reason varies: "timed-out and not checkpointable", or the error the
    # interrupted rank raised); either way the run never completed and its data must go
    assert point["failure_class"] in ("timeout", "worker_crash"), point
    wait_clean(tmp_path, "tidyt", tier, fs)
