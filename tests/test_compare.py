"""compare: matched cells, ratios with CIs, and the exit code both ways."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from studyctl.reporting import parse_threshold

from .test_collect import copy_study


def slow_down(study: Path, factor: float) -> None:
    """Edit result files as if the storage were `factor` times as fast (bandwidths scaled)."""
    for path in study.glob("points/*/attempt-*/result.json"):
        data = json.loads(path.read_text())
        for c in data["checkpoints"]:
            c["aggregate_GiBps"] *= factor
        path.write_text(json.dumps(data))


def run_compare(results: Path, a: str, b: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studyctl.cli", "compare", a, b, "--results", str(results), *extra],
                          capture_output=True, text=True, timeout=120)


def test_compare_exit_codes(small_study: Path, tmp_path: Path) -> None:
    a = copy_study(small_study, tmp_path / "a")
    b = copy_study(small_study, tmp_path / "b")
    results = tmp_path / "cmp"
    (results).mkdir()
    (results / "base").symlink_to(a)
    (results / "same").symlink_to(b)
    same = run_compare(results, "base", "same")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "16 matched cells" in same.stdout and "0 cell(s) regressed" in same.stdout

    c = copy_study(small_study, tmp_path / "c")
    slow_down(c, 0.5)
    (results / "slower").symlink_to(c)
    slower = run_compare(results, "base", "slower", "--threshold", "10%")
    assert slower.returncode == 1
    assert "REGRESSED" in slower.stdout and "16 cell(s) regressed" in slower.stdout
    assert (c / "compare" / "base" / "overlay.png").stat().st_size > 10_000
    faster = run_compare(results, "slower", "base")
    assert faster.returncode == 0 and "faster" in faster.stdout


def test_threshold_parsing() -> None:
    assert parse_threshold("5%") == 0.05 and parse_threshold("0.1") == 0.1


def test_bad_threshold_is_one_line_error(small_study: Path, tmp_path: Path) -> None:
    proc = run_compare(small_study.parent, "small", "small", "--threshold", "lots")
    assert proc.returncode == 2 and "--threshold" in proc.stderr and "Traceback" not in proc.stderr
