"""A point that did not fsync (checkpoint.fsync: false, as DLIO) is its own cell, flagged "no fsync" everywhere."""

from __future__ import annotations

from pathlib import Path

from studyctl.analysis.labels import axis_label
from studyctl.analysis.tables import build_tables
from tests.resultgen import make_point, write_result


def test_no_fsync_points_are_their_own_flagged_cells(tmp_path: Path) -> None:
    study = tmp_path / "s"
    for rep in range(3):
        write_result(study, make_point(rep=rep), [2.0, 2.0], [3.0])
        write_result(study, make_point(rep=rep, fsync=False), [2.0, 2.0], [3.0])
    summary = build_tables(study).summary
    assert set(summary["fsync"]) == {True, False} and len(summary) == 2 * 2  # 2 cells × 2 phases, never pooled
    for _, row in summary.iterrows():
        assert ("no fsync" in row["flags"]) is (not row["fsync"])
    assert axis_label("fsync", False) == "no fsync" and axis_label("fsync", True) == "fsync"
