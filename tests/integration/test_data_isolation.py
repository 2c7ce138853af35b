"""Checkpoint files belong to one attempt of one study directory: never shared, never deleted under a live writer."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from studyctl import api
from studyctl.attempt.data import Cleanup, remove_attempt_data
from studyctl.definition.checkpoint.points import WorkerTask, data_key
from tests.integration.test_worker import make_task, run_worker

SWEEP = """\
study: twin
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{nodes: 1, ranks_per_node: 1}}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: 0.002, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4, keep: true}}
"""


def tasks_of(study_dir: Path) -> list[WorkerTask]:
    return [WorkerTask.model_validate_json(p.read_text()) for p in study_dir.glob("points/*/attempt-*/task.json")]


def test_same_study_name_in_two_results_directories_writes_two_data_directories(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    sweep = tmp_path / "twin.yaml"
    sweep.write_text(SWEEP.format(fs=fs))
    for results in ("results-a", "results-b"):
        api.submit(sweep, "local", tmp_path / results)
    [a], [b] = tasks_of(tmp_path / "results-a" / "twin"), tasks_of(tmp_path / "results-b" / "twin")
    assert a.point_id == b.point_id and a.data_dir != b.data_dir
    assert a.data_key == data_key(tmp_path / "results-a" / "twin")
    for task in (a, b):  # kept (keep: true), each in its own directory
        assert task.data_dir.is_dir() and any(task.data_dir.rglob("*.pt"))


def hold_claim(task: WorkerTask) -> int:
    task.claim_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(task.claim_file, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"the test's live writer")
    return fd


def test_a_second_live_writer_is_refused_and_touches_nothing(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task_path = make_task(tmp_path, fs)
    task = WorkerTask.model_validate_json(task_path.read_text())
    task.data_dir.mkdir(parents=True)
    theirs = task.data_dir / "theirs.pt"
    theirs.write_bytes(b"x" * 4096)
    fd = hold_claim(task)
    try:
        proc = run_worker(task_path, 2)
    finally:
        os.close(fd)
    assert proc.returncode != 0
    err = json.loads((tmp_path / "out" / "error.json").read_text())
    assert err["failure_class"] == "busy" and "the test's live writer" in err["reason"]
    assert theirs.read_bytes() == b"x" * 4096  # the live writer's files are untouched


def test_leftover_data_is_removed_only_when_unclaimed_and_not_kept(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task = WorkerTask.model_validate_json(make_task(tmp_path, fs).read_text())
    task.data_dir.mkdir(parents=True)
    (task.data_dir / "step").mkdir()
    (task.data_dir / "step" / "f.pt").write_bytes(b"y")
    fd = hold_claim(task)
    try:
        assert remove_attempt_data(task.point, task.places, no_tier) is Cleanup.HELD and task.data_dir.is_dir()
    finally:
        os.close(fd)
    kept = task.point.model_copy(update={"checkpoint": task.point.checkpoint.model_copy(update={"keep": True})})
    assert remove_attempt_data(kept, task.places, no_tier) is Cleanup.DONE and task.data_dir.is_dir()
    assert remove_attempt_data(task.point, task.places, no_tier) is Cleanup.DONE and not task.data_dir.exists()
    assert not task.claim_file.exists() and not task.data_dir.parent.exists()


def no_tier(place: object) -> bool:
    raise AssertionError("a sync point has no node-local place")
