"""The MLPerf Storage view of a small real study (local backend, real workers), as a person sees it in Chromium."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from studyctl import api
from tests.cli import run_cli
from tests.integration.test_report import colour_fraction, screenshot

SHM = Path("/dev/shm")

# llama3-8b in MLPerf's CLOSED shape (8 processes, ZeRO 3, 10 writes then 10 reads) but scaled down, once on
# another filesystem than the results with fsync, once beside the results without fsync; gpt2-125m is no MLPerf
# model at all. Nothing meets CLOSED, each for its reasons.
SWEEP = """\
study: mlp
ceilings: off
models: [llama3-8b, gpt2-125m]
matrix: {{zero_stage: 3, nodes: 1, ranks_per_node: 8}}
zip:
  - {{filesystem: [shm, beside], fsync: [true, false]}}
filesystems:
  shm: {{path: {shm}}}
  beside: {{path: {beside}}}
checkpoint: {{scale: 0.0001, writes: 10, reads: 10, buffer_mib: 4, block_mib: 1}}
local: {{timeout_s: 600}}
calibration: {{enabled: false}}  # the four MLPerf-shaped points only
"""


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    assert SHM.is_dir() and SHM.stat().st_dev != Path.cwd().stat().st_dev, "needs /dev/shm as its own filesystem"
    path = SHM / f"studyctl-mlperf-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_mlperf_view_marks_unmet_rules_and_renders(tmp_path: Path, shm_dir: Path) -> None:
    beside = tmp_path / "ckpt"
    beside.mkdir()
    sweep = tmp_path / "mlp.yaml"
    sweep.write_text(SWEEP.format(shm=shm_dir, beside=beside))
    results = tmp_path / "results"
    rep = api.submit(sweep, results=results)
    assert rep.points == 4
    proc = run_cli("mlperf", "mlp", "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    assert "llama3-8b: does not meet CLOSED (no point met: full size)" in proc.stdout
    assert "gpt2-125m: does not meet CLOSED" in proc.stdout and "processes" in proc.stdout

    verdicts, html, md = api.mlperf_report("mlp", results)
    llama = next(v for v in verdicts if v.model == "llama3-8b")
    good = next(p for p in llama.points if "shm" in p.label)
    bad = next(p for p in llama.points if "beside" in p.label)
    assert [c.rule for c in good.checks if not c.passed] == ["full size"]
    assert good.figures.write_throughput_GBps > 0 and good.figures.read_duration_s > 0
    failed = {c.rule: c.why for c in bad.checks if not c.passed}
    assert set(failed) == {"full size", "fsync", "separate filesystems"}
    assert "no fsync" in failed["fsync"] and "both on" in failed["separate filesystems"]

    text = html.read_text()
    assert "does not meet CLOSED" in text and "scaled to 0.0001" in text and "10^9 bytes" in text
    assert "✗ fail" in text and "✓ pass" in text and "maximum over processes" in text
    assert "**fail** fsync" in md.read_text()
    img = screenshot(html, tmp_path / "mlperf.png", tmp_path / "profile", height=1800)
    assert (img < 0.95).any(axis=-1).mean() > 0.03, "the page is (almost) blank"
    assert colour_fraction(img, "#cf222e") > 0.0002 and colour_fraction(img, "#1a7f37") > 0.0002  # red and green
    assert np.isfinite(img).all()
