"""A results disk that fills while real workers run (a real small tmpfs; real mpiexec ranks): each point that
cannot write its result, nor then its error record, fails saying the results disk is full, never only "exited
with code N and no error record". The checkpoint data is on another filesystem, which has room."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from studyctl.definition.result.result_schema import RECORD_REFUSED_EXIT
from studyctl.study.ledger import Ledger
from tests.integration.test_cleanup_runs import wait_for
from tests.integration.test_full_disk import fill
from tests.integration.test_worker import MPIEXEC, make_task
from tests.procs import pids_under
from tests.tmpfs import small_tmpfs

SWEEP = """\
study: full
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{nodes: 1, ranks_per_node: [1, 2]}}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: 0.001, writes: 4, reads: 1, buffer_mib: 4, block_mib: 4}}
training: {{simulated_step: {{compute_s: 0.1}}}}
local: {{max_concurrent: 1}}
"""


@pytest.fixture
def results_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "4m") as mnt:
        yield mnt


def test_points_on_a_full_results_disk_say_the_disk_is_full(tmp_path: Path, results_disk: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    sweep = tmp_path / "full.yaml"
    sweep.write_text(SWEEP.format(fs=fs))
    results = results_disk / "results"
    proc = subprocess.Popen([sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results",
                             str(results)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: bool(pids_under(results, lambda args: args[1:3] == [b"-m", b"worker"])))
        fill(results_disk)  # the first point is running: neither point has room for its result now
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert "Traceback" not in out + err, err
    with Ledger(results / "full" / "ledger.sqlite", readonly=True) as ledger:
        ended = {a.point_id: (a.state.value, a.failure_class, a.reason) for a in ledger.latest_attempts()}
    assert len(ended) == 2
    for state, failure, reason in ended.values():
        assert (state, failure) == ("FAILED", "io_error"), reason
        assert reason is not None and "the results disk is full" in reason, reason
    assert list(fs.rglob("*.pt")) == [], "the checkpoint data went all the same"


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_worker_refused_its_error_record_exits_saying_so(tmp_path: Path, results_disk: Path, ranks: int) -> None:
    """Its output is a pipe here, so its exit code reaches us (a full disk under mpiexec's own output makes
    mpiexec exit 255, which is why the backend looks at the filesystem too)."""
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(results_disk, fs, world=ranks)  # result and error record on the results disk
    fill(results_disk)
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "worker", str(task)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == RECORD_REFUSED_EXIT, proc.stderr
    assert list(fs.rglob("*.pt")) == [], "the checkpoint data went all the same"
