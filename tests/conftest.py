"""Shared fixtures: one small real study (local backend, real MPI workers) reused by the collect tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.s3.server import s3_private_server, s3_server  # noqa: F401  (fixtures for every test package)

SMALL_STUDY = """\
study: {name}
models: [gpt2-125m]
matrix:
  zero_stage: [1, 3]
  nodes: [1, 2]
  ranks_per_node: 1
  io_mode: [buffered, direct]
filesystems:
  scratch: {{path: {fs}}}
repetitions: 2
checkpoint: {{scale: 0.004, writes: 2, reads: {reads}, buffer_mib: 4, block_mib: 4}}
ceilings: off  # its 16 measure points alone (tests/integration/test_ceilings.py collects a study with ceilings)
calibration: {{enabled: false}}
"""


def run_small_study(root: Path, name: str = "small", reads: int = 2) -> Path:
    """Runs a 16-point study for real and returns its study directory."""
    from studyctl import api as study

    fs = root / "fs"
    fs.mkdir(parents=True, exist_ok=True)
    sweep = root / f"{name}.yaml"
    sweep.write_text(SMALL_STUDY.format(name=name, fs=fs, reads=reads))
    study.submit(sweep, "local", root / "results")
    return root / "results" / name


@pytest.fixture(scope="session")
def small_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_small_study(tmp_path_factory.mktemp("small-study"))
