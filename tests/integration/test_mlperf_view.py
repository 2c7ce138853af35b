"""The MLPerf Storage view of a small real study (local backend, real workers) under v3.0 and v2.0 rules, as a
person sees it in Chromium, and its v3.0-shaped results tree."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from studyctl import api
from studyctl.analysis.mlperf.view import PointVerdict
from tests.cli import run_cli
from tests.integration.test_report import colour_fraction, screenshot

SHM = Path("/dev/shm")

# llama3-8b in MLPerf's CLOSED shape (8 processes, ZeRO 3, 10 writes then 10 reads) but scaled down, once on
# another filesystem than the results with fsync, once beside the results without fsync; gpt2-125m is no MLPerf
# model at all. Nothing meets CLOSED, each for its reasons. Every point is declared a subset run of 8 processes:
# v3.0 allows that for 8B only, v2.0 for every model but 8B.
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
checkpoint: {{scale: 0.0001, writes: 10, reads: 10, buffer_mib: 4, block_mib: 1, subset_world_size: 8}}
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
    proc = run_cli("mlperf", "mlp", "--results", str(results), "--out", str(tmp_path / "tree"))
    assert proc.returncode == 0, proc.stderr
    assert ("llama3-8b: does not meet CLOSED v3.0 (no point met: full size; unknown: accelerator memory)"
            in proc.stdout)
    assert "gpt2-125m: does not meet CLOSED v3.0" in proc.stdout and "processes" in proc.stdout
    v2 = run_cli("mlperf", "mlp", "--results", str(results), "--rules", "v2.0")
    assert "llama3-8b: does not meet CLOSED v2.0 (no point met: full size, subset mode;" in v2.stdout, v2.stderr

    verdicts, html, md = api.mlperf_report("mlp", results)
    llama = next(v for v in verdicts if v.model == "llama3-8b")
    good = next(p for p in llama.points if "shm" in p.label)
    bad = next(p for p in llama.points if "beside" in p.label)
    assert [c.rule for c in good.checks if not c.passed] == ["full size", "accelerator memory"]
    assert good.figures.write_throughput_GBps and good.figures.read_duration_s
    failed = {c.rule: c.why for c in bad.checks if c.verdict == "fail"}
    assert set(failed) == {"full size", "fsync", "separate filesystems"}
    assert "no fsync" in failed["fsync"] and "both on" in failed["separate filesystems"]
    assert_tree(tmp_path / "tree", good)

    text = html.read_text()
    assert "does not meet CLOSED" in text and "scaled to 0.0001" in text and "10^9 bytes" in text
    assert "✗ fail" in text and "✓ pass" in text and "? unknown" in text and "maximum over processes" in text
    assert "§4.3.5" in text and "MLPerf Storage v3.0" in text
    assert "**fail** fsync" in md.read_text()
    img = screenshot(html, tmp_path / "mlperf.png", tmp_path / "profile", height=1800)
    assert (img < 0.95).any(axis=-1).mean() > 0.03, "the page is (almost) blank"
    assert colour_fraction(img, "#cf222e") > 0.0002 and colour_fraction(img, "#1a7f37") > 0.0002  # red and green
    assert np.isfinite(img).all()


def assert_tree(tree: Path, good: PointVerdict) -> None:
    """The tree's llama3-8b leaf is the shm point (the nearest CLOSED), with 8 ranks' stats from the real run."""
    (leaf,) = tree.glob("closed/*/results/mlp-shm/checkpointing/llama3-8b/2*_*")
    summary = json.loads((leaf / "summary.json").read_text())
    assert summary["metric"]["save_checkpoint_io_mean_GB_per_second"] == pytest.approx(
        good.figures.write_throughput_GBps)
    assert summary["metric"]["checkpoint_size_GB"] == pytest.approx(good.figures.checkpoint_GB)
    assert len(list(leaf.glob("*_per_epoch_stats.json"))) == 8
    rank = json.loads((leaf / "3_per_epoch_stats.json").read_text())["1"]
    assert len(rank) == 20 and all(entry["duration"] > 0 for entry in rank.values())
    verdicts = json.loads((leaf.parent / "studyctl_verdicts.json").read_text())
    assert verdicts["point_id"] == good.point_id and verdicts["status"] == "fail"
