"""A point that did not fsync (checkpoint.fsync: false, as DLIO) is labelled "no fsync" in every table."""

from __future__ import annotations

import json
from pathlib import Path

from studyctl.analysis.tables import build_tables
from tests.resultgen import make_point, result_dict


def test_no_fsync_points_are_their_own_labelled_cells(tmp_path: Path) -> None:
    study = tmp_path / "s"
    for fsync, point in ((True, make_point()), (False, make_point(rep=1))):
        data = result_dict(point, [2.0, 2.0], [3.0], study="s")
        data["io"]["fsync_per_file"] = fsync
        path = study / "points" / point.point_id / "attempt-1" / "result.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data))
    tables = build_tables(study)
    assert set(tables.points["io_mode"]) == {"buffered", "buffered, no fsync"}
    assert set(tables.summary["io_mode"]) == {"buffered", "buffered, no fsync"}  # not averaged together
