"""The worker measures only the filesystem the sweep names: a missing path or another mount type is refused."""

from __future__ import annotations

import json
from pathlib import Path

from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.host import mount_of
from tests.integration.test_worker import files_under, make_task, run_worker


def retarget(task_path: Path, fs: Path, kind: str | None) -> None:
    task = WorkerTask.model_validate_json(task_path.read_text())
    task_path.write_text(task.model_copy(update={"filesystem_path": str(fs), "filesystem_kind": kind})
                         .model_dump_json())


def error_of(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "error.json").read_text())


def test_missing_filesystem_path_is_never_created(tmp_path: Path) -> None:
    missing = tmp_path / "lustre" / "scratch"
    task = make_task(tmp_path, missing)
    proc = run_worker(task, 2)
    assert proc.returncode != 0
    err = error_of(tmp_path)
    assert err["failure_class"] == "config"
    assert f"filesystem path {missing} does not exist" in err["reason"]
    assert not (tmp_path / "lustre").exists()


def test_kind_is_checked_against_the_real_mount(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    fstype = mount_of(str(fs))["fstype"]
    task = make_task(tmp_path, fs)
    retarget(task, fs, "lustre")
    assert run_worker(task, 2).returncode != 0
    err = error_of(tmp_path)
    assert err["failure_class"] == "config"
    assert f"is on a {fstype} mount, not kind lustre" in err["reason"]
    assert files_under(fs) == []
    (tmp_path / "out" / "error.json").unlink()
    retarget(task, fs, "local")  # the test directory is on a node-local disk here
    proc = run_worker(task, 2)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["filesystem"]["fstype"] == fstype
