"""The local backend refuses what cannot run here, before any process starts, as FAILED points with the reason:
no usable mpiexec, more ranks than this machine's cores allow, buffers beyond its available memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from studyctl import api as study
from studyctl.backends.machine import Machine
from studyctl.states import FailureClass, State
from tests.cli import run_cli

SWEEP = """\
study: g
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{zero_stage: 1, nodes: {nodes}, ranks_per_node: {rpn}}}
filesystems:
  scratch: {{path: {fs}}}
checkpoint: {{scale: 0.001, writes: 1, reads: 1, buffer_mib: {buffer}, block_mib: 4}}
local: {local}
"""


def sweep_file(tmp_path: Path, nodes: int = 1, rpn: int = 1, buffer: int = 4, local: str = "{timeout_s: 60}") -> Path:
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    path = tmp_path / "g.yaml"
    path.write_text(SWEEP.format(nodes=nodes, rpn=rpn, buffer=buffer, local=local, fs=fs))
    return path


def submitted(tmp_path: Path, sweep: Path) -> tuple[int, str, str | None, str | None]:
    """(exit code, output, failure class, reason) of submitting `sweep` on the local backend."""
    results = tmp_path / "results"
    proc = run_cli("sweep", "submit", str(sweep), "--results", str(results))
    assert "Traceback" not in proc.stdout + proc.stderr
    (point,) = study.status("g", results).points
    assert point.state is State.FAILED and point.latest is not None, proc.stdout + proc.stderr
    assert not list((tmp_path / "fs").iterdir())  # nothing ran: no data directory
    return proc.returncode, proc.stdout + proc.stderr, point.latest.failure_class, point.latest.reason


def test_ranks_beyond_cores_times_the_factor_are_refused_with_the_numbers(tmp_path: Path) -> None:
    cores = Machine.this().cores
    sweep = sweep_file(tmp_path, nodes=cores + 1, local="{max_ranks_per_core: 1}")
    code, output, failure, reason = submitted(tmp_path, sweep)
    assert code == 1 and failure == FailureClass.CONFIG.value
    assert reason == (f"{cores + 1} ranks ({cores + 1} nodes × 1) exceed this machine's {cores} cores × "
                      f"local.max_ranks_per_core 1 = {cores} ranks")
    assert reason in " ".join(output.split())


def test_buffers_beyond_the_available_memory_are_refused_with_the_numbers(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, rpn=2, buffer=64 * 1024 * 1024)  # 2 × 64 TiB
    code, _, failure, reason = submitted(tmp_path, sweep)
    assert code == 1 and failure == FailureClass.CONFIG.value
    assert reason is not None and reason.startswith("2 ranks need 128.00 TiB of memory here (67108864 MiB buffer ")
    assert "over this machine's available " in reason


@pytest.mark.parametrize("kind", ["missing", "not executable", "not a program"])
def test_an_unusable_mpiexec_fails_the_points_in_one_line(tmp_path: Path, kind: str) -> None:
    mpiexec = tmp_path / "bin" / "mpiexec"
    if kind != "missing":
        mpiexec.parent.mkdir()
        mpiexec.write_bytes(b"\x7fELF-not-really\x00\x01")
        mpiexec.chmod(0o755 if kind == "not a program" else 0o644)
    code, output, failure, reason = submitted(tmp_path, sweep_file(tmp_path, local=f"{{mpiexec: {mpiexec}}}"))
    assert code == 1 and failure == FailureClass.CONFIG.value and reason is not None
    assert str(mpiexec) in reason and reason in " ".join(output.split())
    if kind == "not a program":
        assert os.strerror(8) in reason  # Exec format error: Popen itself refused it
    else:
        assert "is not an executable file" in reason
