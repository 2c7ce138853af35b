"""scripts/check_report.py: the main job's last step names every cell whose report lacks a 95% CI, a ceiling share
(with its 95% CI) or a fitted projection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
ROW = {"role": "measure", "nodes": 1, "ranks_per_node": 2, "io_mode": "direct", "strategy": "sync", "phase": "write",
       "bytes_over_time_GiBps_ci95": 0.1, "ceiling_share": 0.9, "ceiling_share_low": 0.8,
       "projection_basis": "fit of 4 runs at scales 0.015, 0.03 (shape s)"}


def check(tmp_path: Path, rows: list[dict]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "s" / "tables").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(tmp_path / "s" / "tables" / "summary.csv", index=False)
    return subprocess.run([sys.executable, str(REPO / "scripts" / "check_report.py"), str(tmp_path), "s"],
                          capture_output=True, text=True)


def test_every_cell_complete_passes_and_calibration_rows_are_no_cells(tmp_path: Path) -> None:
    proc = check(tmp_path, [ROW, {**ROW, "phase": "read"}, {**ROW, "role": "calibration", "ceiling_share": None}])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every cell × phase row (2)" in proc.stdout


def test_a_cell_without_a_ci_a_ceiling_share_or_a_fit_is_named(tmp_path: Path) -> None:
    rows = [ROW, {**ROW, "io_mode": "buffered", "bytes_over_time_GiBps_ci95": None},
            {**ROW, "phase": "read", "ceiling_share": None, "ceiling_share_low": None,
             "projection_basis": "plain scaling (no fit: time assumed ∝ bytes)"}]
    proc = check(tmp_path, rows)
    assert proc.returncode == 1
    assert "2 of 3 cell × phase rows" in proc.stdout
    assert "io_mode buffered, strategy sync, phase write: lacks 95% CI\n" in proc.stdout
    assert ("io_mode direct, strategy sync, phase read: lacks ceiling share, ceiling share's 95% CI, fitted projection"
            in proc.stdout)


def test_an_unreadable_table_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "check_report.py"), str(tmp_path), "absent"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "summary.csv" in proc.stderr
