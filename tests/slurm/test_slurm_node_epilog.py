"""The project's cluster cleans a node's /dev/shm after each job, as real sites do: an MPI rank killed before
MPI_Finalize leaves MPICH's node-shared segment, named after the job's PMI name, and a later job given the
same id dies in MPI_Init on it. Real daemons, a real job; the segments are files the test makes."""

from __future__ import annotations

import mmap
import os
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm


def _segment(name: str, age_s: float) -> Path:
    path = Path("/dev/shm") / name
    path.write_bytes(b"\0" * 4096)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_a_job_end_removes_stale_unmapped_mpich_segments_only(tmp_path: Path) -> None:
    tag = f"{os.getpid():x}{time.monotonic_ns() % 65536:x}"
    stale = _segment(f"mpich_shm_{tag}a_0", age_s=600)
    fresh = _segment(f"mpich_shm_{tag}b_0", age_s=0)
    mapped = _segment(f"mpich_shm_{tag}c_0", age_s=600)
    other = _segment(f"notmpich_{tag}_0", age_s=600)
    try:
        with mapped.open("r+b") as handle, mmap.mmap(handle.fileno(), 4096):
            subprocess.run(["sbatch", "--wait", "-o", "/dev/null", "--wrap", "true"], cwd=tmp_path, check=True,
                           capture_output=True, timeout=60)
            deadline = time.monotonic() + 30  # the epilog may still run as sbatch returns
            while stale.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not stale.exists(), "a stale segment no process maps is removed"
            assert fresh.exists(), "a segment younger than a minute may belong to a job starting now"
            assert mapped.exists(), "a segment a live process maps is in use"
            assert other.exists(), "only MPICH's segments are touched"
    finally:
        for path in (stale, fresh, mapped, other):
            path.unlink(missing_ok=True)
