"""Real processes: collects of one study at the same time all succeed and leave a complete report; a real
local study under a results directory whose path holds console markup prints it verbatim through submit,
status (also --watch), collect and mlperf.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd

from studyctl.attempt.paths import StudyPaths
from studyctl.fsutil import is_temporary
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.resultgen import scaling_study

HOSTILE = "r [/x] [bold]b[/bold] [project] :smile:"


def _collects(results: Path, n: int) -> list[subprocess.CompletedProcess[str]]:
    """`n` collect processes started together (one Popen after another, before any is waited on)."""
    procs = [subprocess.Popen([sys.executable, "-m", "studyctl.cli", "collect", "got", "--results", str(results)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=300), *p.communicate()) for p in procs]


def assert_complete(root: Path) -> None:
    paths = StudyPaths(root)
    html, md = paths.report_html.read_text(), paths.report_md.read_text()
    assert html.rstrip().endswith("</html>") and "## Provenance" in md
    pngs = sorted(paths.plots.glob("*.png"))
    assert len(pngs) >= 8
    for png in pngs:
        assert f"plots/{png.name}" in md and mpimg.imread(png).size > 0  # every plot listed and a whole PNG
    assert len(pd.read_parquet(paths.tables / "summary.parquet")) == len(pd.read_csv(paths.tables / "summary.csv"))
    left = [p for d in paths.collect_dirs for p in d.iterdir() if is_temporary(p.name)]
    assert not left, left


def test_three_simultaneous_collects_all_succeed_and_leave_a_complete_report(tmp_path: Path) -> None:
    results = tmp_path / "results"
    root = results / "got"
    scaling_study(root, reps=2, nodes=(1, 2, 4), models=("gpt2-125m", "llama3-8b"), filesystems=("a", "b"))
    Ledger(root / "ledger.sqlite").close()
    for _ in range(3):  # each round from scratch: nothing reused from the last (no manifest, no cache)
        StudyPaths(root).outputs_manifest.unlink(missing_ok=True)
        StudyPaths(root).results_cache.unlink(missing_ok=True)
        runs = _collects(results, 3)
        assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr for r in runs]
        assert all(f"report: {root}/report.html" in r.stdout for r in runs)
        assert_complete(root)


SWEEP = """\
study: shown
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{nodes: [1, 2], ranks_per_node: 1}}
filesystems: {{scratch: {{path: '{fs}'}}}}
exclude:
  - {{nodes: 2, reason: 'no [/x] [project] [bold]here :smile:'}}
checkpoint: {{scale: 0.004, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4}}
"""


def test_a_real_study_under_a_markup_path_prints_verbatim(tmp_path: Path) -> None:
    base = tmp_path / HOSTILE
    results, fs = base / "results", base / "fs"
    fs.mkdir(parents=True)
    sweep = base / "shown.yaml"
    sweep.write_text(SWEEP.format(fs=fs))
    root = results / "shown"
    sub = run_cli("sweep", "submit", str(sweep), "--results", str(results), subprocess_=True)
    assert sub.returncode == 0, sub.stderr
    assert f"results: {root}\n" in sub.stdout and "study shown: 2 points (1 excluded" in sub.stdout
    for watch in ((), ("--watch", "--interval", "0.2")):
        status = run_cli("sweep", "status", "shown", "--results", str(results), *watch, subprocess_=True)
        assert status.returncode == 0, status.stderr
        assert "no [/x] [project] [bold]here :smile:" in status.stdout and "COMPLETED" in status.stdout
    got = run_cli("collect", "shown", "--results", str(results), subprocess_=True)
    assert got.returncode == 0 and f"report: {root}/report.html\n" in got.stdout, got.stderr
    mlperf = run_cli("mlperf", "shown", "--results", str(results), subprocess_=True)
    assert mlperf.returncode == 0 and f"MLPerf view: {root}/mlperf.html\n" in mlperf.stdout, mlperf.stderr
    assert oct(os.stat(root / "report.html").st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
