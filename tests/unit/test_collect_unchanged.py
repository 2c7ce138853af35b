"""A collect with nothing new: one scan of the attempt tree decides it, without the analysis stack; the scan's own
lstat stands in for a stat only where the file is not a symlink, so a symlinked result whose target changed is
still seen as changed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from studyctl.analysis.collect import collect
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.tree import scan_attempts, stamp_stat
from tests.resultgen import make_point, write_error, write_result

HEAVY = ("pandas", "numpy", "matplotlib", "pyarrow", "jinja2", "pydantic")


def _study(root: Path) -> Path:
    study = root / "quiet"
    for nodes in (1, 2):
        for rep in range(2):
            write_result(study, make_point(nodes=nodes, rep=rep), [2.0 * nodes, 2.1 * nodes])
    return study


def test_nothing_new_is_answered_without_pandas_matplotlib_or_pydantic(tmp_path: Path) -> None:
    study = _study(tmp_path)
    assert not collect(study).unchanged
    code = ("import sys; from studyctl.analysis.collect import collect; r = collect(sys.argv[1]); "
            f"print(r.unchanged, r.points, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(study)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.stdout.split("\n")[0] == "True 4 []", out.stdout + out.stderr


def test_the_scan_keeps_each_files_lstat_and_a_stamp_follows_a_symlink(tmp_path: Path) -> None:
    study = _study(tmp_path)
    point = make_point(nodes=1, rep=0)
    write_error(study, point, 2, "io", "disk full")
    found = scan_attempts(StudyPaths(study))
    newest, first = found[point.point_id]
    assert (newest.attempt, newest.result, newest.error) == (2, None, study / "points" / point.point_id /
                                                             "attempt-2" / "error.json")
    assert first.result is not None and first.result_lstat is not None
    assert stamp_stat(str(first.result), first.result_lstat) == os.stat(first.result)
    # a result that is a symlink: its stamp is the target's, and follows the target when it changes
    target = study / "kept.json"
    target.write_bytes(first.result.read_bytes())
    first.result.unlink()
    first.result.symlink_to(target)
    linked = scan_attempts(StudyPaths(study))[point.point_id][1]
    assert linked.result_lstat is not None and stamp_stat(str(linked.result), linked.result_lstat) == os.stat(target)
    target.unlink()  # dangling: the link's own lstat is its stamp
    assert stamp_stat(str(linked.result), linked.result_lstat) == os.lstat(linked.result)


def test_a_changed_symlink_target_is_not_nothing_new(tmp_path: Path) -> None:
    study = _study(tmp_path)
    point = make_point(nodes=2, rep=1)
    result = study / "points" / point.point_id / "attempt-1" / "result.json"
    target = study / "elsewhere.json"
    result.rename(target)
    result.symlink_to(target)
    assert not collect(study).unchanged
    assert collect(study).unchanged
    write_result(tmp_path / "other", point, [9.0, 9.1])  # the same point measured otherwise, copied over the target
    target.write_bytes((tmp_path / "other" / "points" / point.point_id / "attempt-1" / "result.json").read_bytes())
    again = collect(study)
    assert not again.unchanged and again.files_read == 1


def test_a_moved_study_names_its_own_files_and_a_manifest_cannot_point_outside(tmp_path: Path) -> None:
    """The manifest keeps paths relative to the study folder: a study moved with its times kept (nothing new)
    lists the files where it now is; a manifest naming a file outside the folder is not believed (made again)."""
    import json
    import shutil

    first = collect(_study(tmp_path / "a"))
    moved = tmp_path / "b" / "quiet"
    shutil.copytree(first.study_dir, moved, copy_function=shutil.copy2)  # times kept: the same stamp
    shutil.rmtree(first.study_dir)
    again = collect(moved)
    assert again.unchanged and again.output_files()
    assert all(p.is_relative_to(moved) and p.exists() for p in again.output_files())
    path = StudyPaths(moved).outputs_manifest
    saved = json.loads(path.read_text())
    saved["report_md"] = str(tmp_path / "elsewhere.md")  # absolute: a received study's manifest names any file
    (tmp_path / "elsewhere.md").write_text("not this study's\n")
    path.write_text(json.dumps(saved))
    remade = collect(moved)
    assert not remade.unchanged and remade.report_md is not None and remade.report_md.is_relative_to(moved)
