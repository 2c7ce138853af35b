"""One reader of what an attempt leaves: one scan of the tree with one symlink rule (never out of the study),
one reader of result.json, and every consumer (collect, compare's tables, the MLPerf view, the ledger's outcome)
agrees on what it finds."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from studyctl.analysis.report.mlperf import load_results
from studyctl.analysis.results import load_rows
from studyctl.analysis.tables import build_tables
from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.result_file import read_result
from studyctl.attempt.tree import MAX_FILE_BYTES, scan_attempts
from studyctl.definition.checkpoint.points import Point
from studyctl.states import State
from tests.resultgen import make_point, result_dict, write_result


def judged_by_everyone(study: Path) -> dict[str, set[str]]:
    """The point ids each consumer takes a result from."""
    paths = StudyPaths(study)
    return {"collect": {r["info"]["point_id"] for r in load_rows(paths).rows},
            "compare": {pid for ids in build_tables(study).summary.get("point_ids", []) for pid in ids.split(",")},
            "mlperf": {r.point_id for r in load_results(study)},
            "ledger": {pid for pid, attempts in scan_attempts(paths).items()
                       if (u := read_outcome(paths.attempt(pid, attempts[0].attempt), pid, attempts[0].attempt))
                       and u.state is State.COMPLETED}}


def test_symlinks_inside_the_study_count_and_those_out_of_it_never_do(tmp_path: Path) -> None:
    study = tmp_path / "study"
    inside_dir, outside_dir, inside_file, outside_file, plain = (make_point(rep=r) for r in range(5))
    write_result(study, plain, [2.0], [3.0])
    archive, elsewhere = study / "archive", tmp_path / "elsewhere"
    # point directories that are symlinks: one into the study's own archive, one out of the study
    write_result(archive, inside_dir, [2.0], [3.0])
    (study / "points" / inside_dir.point_id).symlink_to(archive / "points" / inside_dir.point_id)
    write_result(elsewhere, outside_dir, [2.0], [3.0])
    (study / "points" / outside_dir.point_id).symlink_to(elsewhere / "points" / outside_dir.point_id)
    # result files that are symlinks (each target a perfectly valid result)
    for p, root in ((inside_file, archive), (outside_file, elsewhere)):
        target = write_result(root, p, [2.0], [3.0])
        link = StudyPaths(study).attempt(p.point_id, 1).result
        link.parent.mkdir(parents=True)
        link.symlink_to(target)
    # an attempt directory that is a symlink out of the study, beside a real attempt 1
    write_result(elsewhere, plain, [9.0], [9.0], attempt=2)
    StudyPaths(study).attempt(plain.point_id, 2).dir.symlink_to(elsewhere / "points" / plain.point_id / "attempt-2")

    paths = StudyPaths(study)
    assert outside_dir.point_id not in paths.point_ids_on_disk()  # the ledger's repair does not count it either
    assert paths.attempts_on_disk(plain.point_id) == [1]
    found = scan_attempts(paths)
    assert set(found) == {plain.point_id, inside_dir.point_id, inside_file.point_id, outside_file.point_id}
    judged = judged_by_everyone(study)
    expected = {plain.point_id, inside_dir.point_id, inside_file.point_id}
    assert all(ids == expected for ids in judged.values()), judged
    problems = {p.point_id: p.reason for p in load_rows(paths).problems}
    target = elsewhere / "points" / outside_file.point_id / "attempt-1" / "result.json"
    assert problems == {outside_file.point_id: f"a symlink out of the study (to {target}): never followed"}
    rows = load_rows(paths).rows
    assert {r["info"]["attempt"] for r in rows if r["info"]["point_id"] == plain.point_id} == {1}  # not the 9 GiB/s


def test_the_study_itself_may_be_a_symlink(tmp_path: Path) -> None:
    """results/<name> pointing at a study elsewhere (compare's tests do this): its own files are inside it."""
    real = tmp_path / "real"
    p = make_point()
    write_result(real, p, [2.0], [3.0])
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "linked").symlink_to(real)
    assert all(ids == {p.point_id} for ids in judged_by_everyone(tmp_path / "results" / "linked").values())


def write_raw(study: Path, point: Point, data: dict[str, Any], attempt: int = 1) -> Path:
    path = StudyPaths(study).attempt(point.point_id, attempt).result
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_the_reader_checks_the_attempt_and_the_names(tmp_path: Path) -> None:
    study = tmp_path / "s"
    p = make_point()
    copied = write_raw(study, p, result_dict(p, [2.0], [3.0], attempt=1), attempt=2)  # attempt 1's result, copied
    assert read_result(copied, p.point_id, 2) == (None, "holds attempt 1, not 2")
    for field, value in (("name", "../../etc"), ("name", "x" * 65), ("name", "a b")):
        canonical = p.canonical()
        canonical["model"][field] = value
        hostile = Point.model_validate(canonical)
        data = result_dict(hostile, [2.0], [3.0])
        path = write_raw(study, hostile, data)
        result, reason = read_result(path, hostile.point_id, 1)
        assert result is None and reason and reason.startswith("model name ") and "is not 1-64 letters" in reason
    q = make_point(rep=1)
    data = result_dict(q, [2.0], [3.0])
    data["filesystem"]["name"] = "<script>"
    assert read_result(write_raw(study, q, data), q.point_id, 1)[1] == (
        "filesystem record's name '<script>' is not 1-64 letters, digits, '_', '.', '-', starting with a letter "
        "or digit")


def test_a_huge_file_is_never_read(tmp_path: Path) -> None:
    study = tmp_path / "s"
    p = make_point()
    path = write_result(study, p, [2.0], [3.0])
    with path.open("r+b") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    reasons = [x.reason for x in load_rows(StudyPaths(study)).problems]
    mib = MAX_FILE_BYTES >> 20
    assert reasons == [f"{MAX_FILE_BYTES + 1} bytes, more than any result file ({mib} MiB): never read"]
    assert judged_by_everyone(study)["mlperf"] == set()


def test_the_ledger_opens_result_files_by_the_same_rules(tmp_path: Path) -> None:
    study = tmp_path / "s"
    out_link, fifo_error, good = (make_point(rep=r) for r in range(3))
    write_result(study, good, [2.0], [3.0])
    paths = StudyPaths(study)
    target = write_result(tmp_path / "other", out_link, [2.0], [3.0])
    link = paths.attempt(out_link.point_id, 1).result
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    assert read_outcome(paths.attempt(out_link.point_id, 1), out_link.point_id, 1) is None  # not COMPLETED
    error = paths.attempt(fifo_error.point_id, 1).error
    error.parent.mkdir(parents=True)
    os.mkfifo(error)  # opening it for reading would block the status command
    update = read_outcome(paths.attempt(fifo_error.point_id, 1), fifo_error.point_id, 1)
    assert update is not None and update.state is State.FAILED and update.reason == "unreadable error.json"
    done = read_outcome(paths.attempt(good.point_id, 1), good.point_id, 1)
    assert done is not None and done.state is State.COMPLETED and done.node_list == "node0"
    shutil.rmtree(tmp_path / "other")
