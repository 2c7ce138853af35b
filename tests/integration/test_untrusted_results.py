"""A results directory is data from someone else: nothing in it runs code, damaged files are reasons, never hangs."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

from studyctl.analysis.collect import collect
from studyctl.analysis.results import load_rows
from studyctl.attempt.paths import StudyPaths
from tests.resultgen import make_point, result_dict, write_result


class Bomb:
    """Unpickling this creates the marker file: what a hostile cache could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def small_study(root: Path) -> tuple[Path, list[Any]]:
    study = root / "results" / "given"
    points = [make_point(nodes=n, rep=r) for n in (1, 2) for r in range(3)]
    for p in points:
        write_result(study, p, [2.0 * p.nodes], [3.0 * p.nodes])
    return study, points


def test_a_malicious_pickle_cache_never_runs_and_results_stay_right(tmp_path: Path) -> None:
    study, points = small_study(tmp_path)
    marker = tmp_path / "pwned"
    cache = StudyPaths(study).tables_cache
    cache.mkdir(parents=True)
    bomb = pickle.dumps(Bomb(marker))
    for name in ("results.pkl", "results.json", "outputs.json"):  # the old cache, the new one, the manifest
        (cache / name).write_bytes(bomb)
    res = collect(study)
    assert not marker.exists()
    assert res.points == len(points) and not res.problems and res.files_read == len(points)
    again = load_rows(StudyPaths(study))  # the rebuilt cache is plain JSON, and used
    assert again.files_cached == len(points) and not marker.exists()
    assert json.loads(StudyPaths(study).results_cache.read_text())["format"] == "studyctl-results-cache"


def test_a_cache_from_another_directory_is_ignored(tmp_path: Path) -> None:
    """A study directory copied (or received) carries its cache; its entries are never trusted."""
    study, points = small_study(tmp_path)
    assert load_rows(StudyPaths(study)).files_read == len(points)
    copy = tmp_path / "copy" / "given"
    copy.parent.mkdir()
    os.rename(study, copy)
    study.mkdir(parents=True)  # the same path, another directory
    os.rename(copy / "points", study / "points")
    os.rename(copy / "tables", study / "tables")
    assert load_rows(StudyPaths(study)).files_read == len(points)


def write_raw(study: Path, point: Any, data: dict[str, Any] | str) -> Path:
    path = study / "points" / point.point_id / "attempt-1" / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def reasons(study: Path) -> dict[str, str]:
    return {p.point_id: p.reason for p in load_rows(StudyPaths(study)).problems}


def test_damaged_figures_are_unusable_with_a_reason(tmp_path: Path) -> None:
    study = tmp_path / "damaged"
    good = make_point(rep=9)
    write_result(study, good, [2.0], [3.0])
    cases: dict[str, tuple[Any, str]] = {}

    def case(rep: int, change: Any, expect: str) -> None:
        p = make_point(rep=rep)
        data = result_dict(p, [2.0, 2.0], [3.0], study=study.name)
        change(data)
        text = json.dumps(data)  # NaN and Infinity as Python writes them
        write_raw(study, p, text)
        cases[p.point_id] = (rep, expect)

    cp = lambda d: d["checkpoints"][0]  # noqa: E731
    case(0, lambda d: cp(d).update(aggregate_GiBps=float("nan")), "checkpoints.0.aggregate_GiBps")
    case(1, lambda d: cp(d).update(span_s=float("inf")), "checkpoints.0.span_s")
    case(2, lambda d: cp(d)["ranks"][0].update(duration_s=-1.0), "greater than or equal to 0")
    case(3, lambda d: cp(d).update(aggregate_GiBps=1e308, rank_bandwidth_max_GiBps=1e308), "above")
    case(4, lambda d: cp(d).update(span_s=0.0, duration_max_s=0.0), "bytes in 0")
    case(5, lambda d: cp(d).update(bytes=cp(d)["bytes"] * 10), "checkpoints.0.bytes")
    case(6, lambda d: d["sizes"].update(written_checkpoint_bytes=1 << 40), "sizes.written_checkpoint_bytes")
    case(7, lambda d: d["sizes"].update(nominal_checkpoint_bytes=10), "sizes.nominal_checkpoint_bytes")
    case(8, lambda d: cp(d)["ranks"][0].update(bytes=cp(d)["ranks"][0]["bytes"] + 1), "add up to")
    found = reasons(study)
    for point_id, (rep, expect) in cases.items():
        assert expect in found[point_id], (rep, found[point_id])
    assert good.point_id not in found
    res = collect(study)  # no NaN in the tables, and 1e308 never reaches the plots
    assert res.points == 1 and len(res.problems) == len(cases)


def test_dangling_symlink_fifo_and_device_are_reasons_never_opened(tmp_path: Path) -> None:
    study = tmp_path / "odd"
    good, link, fifo, dev = (make_point(rep=r) for r in range(4))
    write_result(study, good, [2.0], [3.0])
    for p in (link, fifo, dev):
        (study / "points" / p.point_id / "attempt-1").mkdir(parents=True)
    os.symlink(tmp_path / "gone.json", study / "points" / link.point_id / "attempt-1" / "result.json")
    os.mkfifo(study / "points" / fifo.point_id / "attempt-1" / "result.json")  # opening it would block
    os.symlink("/dev/zero", study / "points" / dev.point_id / "attempt-1" / "result.json")  # reading: endless
    found = reasons(study)
    assert "dangling symlink" in found[link.point_id] and "gone.json" in found[link.point_id]
    assert "a FIFO, not a regular file: skipped, never opened" in found[fifo.point_id]
    assert "a symlink out of the study (to /dev/zero): never followed" in found[dev.point_id]
    res = collect(study)
    assert res.points == 1 and len(res.problems) == 3


def test_the_mlperf_view_skips_fifos_and_implausible_results(tmp_path: Path) -> None:
    from studyctl.analysis.report.mlperf import load_results

    study = tmp_path / "mlperf"
    good, fifo, bad = (make_point(rep=r) for r in range(3))
    write_result(study, good, [2.0], [3.0])
    (study / "points" / fifo.point_id / "attempt-1").mkdir(parents=True)
    os.mkfifo(study / "points" / fifo.point_id / "attempt-1" / "result.json")
    data = result_dict(bad, [2.0], [3.0], study=study.name)
    data["sizes"]["written_checkpoint_bytes"] = 1 << 40
    write_raw(study, bad, data)
    assert [r.point_id for r in load_results(study)] == [good.point_id]
