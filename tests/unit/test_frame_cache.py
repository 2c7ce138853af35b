"""The kept per-point frames: a frame patched by point equals one rebuilt from every row (columns, dtypes, values and
their types), on real parsed results, after a point is added, changed, removed or re-run, and a cache file that is
damaged, foreign, a FIFO or of other code is rebuilt, never trusted."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from studyctl.analysis import frame_cache
from studyctl.analysis.frame_cache import FrameSpec, point_frame, same_frame
from studyctl.analysis.results import LoadedRows, load_rows, rank_rows, ranks_text
from studyctl.analysis.tables import CHECKPOINTS, RANKS, build_tables
from studyctl.attempt.paths import StudyPaths
from tests.resultgen import make_point, write_result

SPECS = (CHECKPOINTS, RANKS)


def _point(i: int) -> Any:
    return make_point(zero=[1, 3][i % 2], nodes=[1, 2, 4][(i // 2) % 3], rep=i // 6, writes=3, reads=2)


def _write(study: Path, i: int, faster: float = 1.0) -> Path:
    bw = (1.5 + 0.1 * i) * faster
    return write_result(study, _point(i), [bw, bw * 1.02, bw * 0.97], [bw * 1.3, bw * 1.1])


@pytest.fixture
def study(tmp_path: Path) -> Path:
    root = tmp_path / "study"
    for i in range(16):
        _write(root, i)
    return root


class Counting:
    """A spec whose builder counts the rows it was asked to build (a patch builds only new points' rows)."""

    def __init__(self, spec: FrameSpec) -> None:
        self.built: list[int] = []
        self.spec = replace(spec, build=self._build)
        self._inner = spec.build

    def _build(self, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
        self.built.append(len(rows))
        return self._inner(rows)


def _loaded(study: Path, whole: bool = False) -> LoadedRows:
    """The rows a collect loads (points from the parse cache lack their bulky rows), or every row whole."""
    loaded = load_rows(StudyPaths(study))
    if whole:
        loaded.complete(range(len(loaded.rows)))
    return loaded


def _check(study: Path, cache_dir: Path | None = None) -> dict[str, list[int]]:
    """Each frame through the kept file equals a rebuild from the same rows; the row counts each builder built."""
    loaded = _loaded(study)
    cache_dir = cache_dir or StudyPaths(study).tables_cache
    built = {}
    for spec in SPECS:
        counting = Counting(spec)
        got = point_frame(counting.spec, loaded.rows, loaded.stamps, cache_dir, study, complete=loaded.complete)
        loaded.complete(range(len(loaded.rows)))
        assert same_frame(got, spec.build(loaded.rows)), spec.name
        built[spec.name] = counting.built
    return built


def test_unchanged_points_are_reused_and_new_ones_built_alone(study: Path) -> None:
    assert _check(study) == {"checkpoints": [16], "ranks": [16]}  # first: every row
    assert _check(study) == {"checkpoints": [], "ranks": []}  # nothing new: the kept frames as they are
    _write(study, 5, faster=1.07)  # a real change: other times, still plausible
    assert _check(study) == {"checkpoints": [1], "ranks": [1]}
    _write(study, 16)  # a new point, placed by its id among the others
    assert _check(study) == {"checkpoints": [1], "ranks": [1]}
    _write(study, 3, faster=0.9)
    _write(study, 11, faster=1.1)
    assert _check(study) == {"checkpoints": [2], "ranks": [2]}


def test_a_rerun_attempt_replaces_its_points_rows(study: Path) -> None:
    _check(study)
    p = _point(7)
    write_result(study, p, [9.0, 9.1, 9.2], [8.0, 8.1], attempt=2)
    assert _check(study) == {"checkpoints": [1], "ranks": [1]}
    assert sum(s[0].startswith(f"points/{p.point_id}/attempt-2/") for s in _loaded(study).stamps) == 1


def test_a_removed_point_rebuilds_the_frames(study: Path) -> None:
    _check(study)
    shutil.rmtree(study / "points" / _point(4).point_id)
    assert _check(study) == {"checkpoints": [15], "ranks": [15]}
    assert _check(study) == {"checkpoints": [], "ranks": []}


def test_new_rows_of_another_dtype_or_columns_rebuild(study: Path) -> None:
    """A changed point whose values infer another dtype (a float where every other row has an int), or whose rows
    carry another column, cannot be spliced in: the frame is rebuilt, and equals a rebuild. (Then the point's ints
    again: the kept float column was the old version's doing, so the frame is rebuilt again.)"""
    loaded = _loaded(study, whole=True)
    cache = StudyPaths(study).tables_cache
    for spec in SPECS:
        point_frame(spec, loaded.rows, loaded.stamps, cache, study)
    for k, change in enumerate(("dtype", "column")):
        rows = copy.deepcopy(loaded.rows)
        stamps = list(loaded.stamps)
        for c in rows[2]["checkpoints"]:
            if change == "dtype":
                c["bytes"] = float(c["bytes"])
            else:
                c["extra_column"] = 1
        if change == "dtype":
            rows[2]["ranks_json"] = ranks_text([(*t[:4], float(t[4]), *t[5:]) for t in rank_rows(rows[2])])
        stamps[2] = (stamps[2][0], stamps[2][1] + 1 + k, stamps[2][2])  # another version each time
        for spec in SPECS:
            counting = Counting(spec)
            got = point_frame(counting.spec, rows, stamps, cache, study)
            assert same_frame(got, spec.build(rows))
            assert counting.built[-1] == 16, (spec.name, change)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "fifo", "foreign", "other_code", "other_counts"])
def test_a_kept_frame_not_ours_is_rebuilt(study: Path, tmp_path: Path, damage: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _check(study)
    path = StudyPaths(study).tables_cache / "frames.checkpoints.arrow"
    if damage == "garbage":
        path.write_bytes(b"not arrow at all")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "fifo":
        path.unlink()
        os.mkfifo(path)  # never opened for blocking; the rebuild is renamed into its place
    elif damage == "foreign":  # a copy of the study: another directory, whose kept frames are not its own
        other = tmp_path / "copy"
        shutil.copytree(study, other)
        assert _check(other)["checkpoints"] == [16]
        return
    elif damage == "other_code":
        monkeypatch.setattr(frame_cache, "FRAME_VERSION", frame_cache.FRAME_VERSION + 1)
    else:  # rows of another study under the same header: counts that do not add up to the stored rows
        loaded = _loaded(study, whole=True)
        frame_cache._write(path, CHECKPOINTS.build(loaded.rows[:3]), frame_cache._header(study) or {},
                           [(s, 3 * 2) for s in loaded.stamps[:4]])
    assert _check(study)["checkpoints"] == [16]


def test_a_frame_arrow_cannot_give_back_exactly_is_not_kept(tmp_path: Path) -> None:
    """None beside NaN in an object column (Arrow makes both null): kept, it would come back otherwise."""
    rows = [{"checkpoints": [{"a": "x", "b": None}], "checkpoint_count": 1},
            {"checkpoints": [{"a": "y", "b": float("nan")}], "checkpoint_count": 1}]
    spec = replace(CHECKPOINTS, build=lambda rs: pd.DataFrame({"a": [r["checkpoints"][0]["a"] for r in rs],
                                                                "b": pd.Series([r["checkpoints"][0]["b"] for r in rs],
                                                                               dtype=object)}))
    stamps = [("points/a/attempt-1/result.json", 1, 1), ("points/b/attempt-1/result.json", 1, 1)]
    (tmp_path / "c").mkdir()
    point_frame(spec, rows, stamps, tmp_path / "c", tmp_path)
    assert not (tmp_path / "c" / "frames.checkpoints.arrow").exists()


def test_collect_tables_equal_a_rebuild_after_changes(study: Path) -> None:
    """Through build_tables, as a collect uses it: after a change the tables equal those built with no kept frame."""
    build_tables(study)
    _write(study, 9, faster=1.07)
    _write(study, 17)
    patched = build_tables(study)
    for spec in SPECS:
        (StudyPaths(study).tables_cache / f"frames.{spec.name}.arrow").unlink()
    rebuilt = build_tables(study)
    for name in ("checkpoints", "ranks", "points", "summary", "training"):
        assert same_frame(getattr(patched, name), getattr(rebuilt, name)), name


def test_a_collect_writes_the_kept_frames_beside_its_tables(study: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collect hands the frames' writes to the child that writes its tables: the files are there when it returns,
    hold the frame as it was built (a change the caller makes afterwards is not in them), and the next collect
    after one change builds that point's rows alone."""
    from studyctl.analysis.collect import collect

    collect(study)
    cache = StudyPaths(study).tables_cache
    assert all((cache / f"frames.{spec.name}.arrow").is_file() for spec in SPECS)
    header = frame_cache._header(study)
    assert header is not None
    kept = frame_cache._read(cache / "frames.checkpoints.arrow", header)
    assert kept is not None and same_frame(kept[0], CHECKPOINTS.build(_loaded(study, whole=True).rows))
    _write(study, 5, faster=1.07)
    counted = {spec.name: Counting(spec) for spec in SPECS}
    import studyctl.analysis.tables as tables_module

    monkeypatch.setattr(tables_module, "CHECKPOINTS", counted["checkpoints"].spec)
    monkeypatch.setattr(tables_module, "RANKS", counted["ranks"].spec)
    later: list[Any] = []
    built = tables_module.build_tables(study, later=later)
    assert {k: c.built for k, c in counted.items()} == {"checkpoints": [1], "ranks": [1]}
    assert len(later) == 2  # handed over, not yet written: the files still hold the frames before the change
    before = frame_cache._read(cache / "frames.checkpoints.arrow", header)
    assert before is not None and same_frame(before[0], kept[0])
    want = CHECKPOINTS.build(_loaded(study, whole=True).rows)
    built.checkpoints["bytes"] = -1  # the caller's own frame, changed after the write was handed over
    for write in later:
        write()
    after = frame_cache._read(cache / "frames.checkpoints.arrow", header)
    assert after is not None and same_frame(after[0], want) and not same_frame(after[0], kept[0])
