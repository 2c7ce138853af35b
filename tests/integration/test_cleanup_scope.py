"""Clean-up removes only what studyctl can prove it wrote for this study and point (adversary tests).

A received study directory is untrusted: its task.json files, its ledger rows, its cleanup markers. Each case
plants something that points a removal elsewhere (an absolute path, `..`, a link to outside at the study's or the
point's level, another study's data, a tier that is not the study's) and runs status, cancel, submit and resubmit:
the victim's files stay, byte for byte. The control: the study's own leftovers are removed by the same commands.

The worker is a stand-in mpiexec (the subprocess boundary) that writes where the real one would (the task's
places) and dies without a result, as a killed worker does; no MPI rank runs here.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from studyctl import api
from studyctl.attempt.paths import StudyPaths
from studyctl.definition.checkpoint.points import WorkerTask, data_key
from studyctl.states import State

SWEEP = """\
study: scope
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{nodes: 1, ranks_per_node: 1, zero_stage: 1, strategy: tiered}}
filesystems:
  scratch: {{path: {fs}}}
  nodetier: {{path: {tier}, kind: local}}
checkpoint: {{scale: 0.001, writes: 1, reads: 0, tier: nodetier}}
local: {{mpiexec: {mpiexec}}}
"""

# Writes a checkpoint file into every place the task names, then dies as a killed worker does.
STAND_IN = """\
import sys
from pathlib import Path
from studyctl.definition.checkpoint.points import WorkerTask
task = WorkerTask.model_validate_json(Path(sys.argv[-1]).read_text())
for place in task.places:
    step = place.path / ("node-0" if place.node_local else "global_step1")
    step.mkdir(parents=True, exist_ok=True)
    (step / "model.pt").write_bytes(b"c" * 4096)
sys.exit(137)
"""


class Study:
    def __init__(self, tmp_path: Path) -> None:
        self.fs, self.tier, self.home = tmp_path / "fs", tmp_path / "tier", tmp_path / "home"
        for d in (self.fs, self.tier, self.home):
            d.mkdir()
        mpiexec = tmp_path / "mpiexec"
        mpiexec.write_text(f"#!{sys.executable}\n{STAND_IN}")
        mpiexec.chmod(0o755)
        self.sweep = tmp_path / "scope.yaml"
        self.sweep.write_text(SWEEP.format(fs=self.fs, tier=self.tier, mpiexec=mpiexec))
        self.results = tmp_path / "results"
        self.paths = StudyPaths((self.results / "scope").resolve())

    @property
    def task_file(self) -> Path:
        (point_id,) = self.paths.point_ids_on_disk()
        return self.paths.attempt(point_id, 1).task

    @property
    def task(self) -> WorkerTask:
        return WorkerTask.model_validate_json(self.task_file.read_text())

    def plant_task(self, **fields: object) -> None:
        self.task_file.write_text(self.task.model_copy(update=fields).model_dump_json())

    def victim(self, where: Path) -> dict[Path, bytes]:
        """A user's folder with files in it; returns them, to compare after."""
        (where / "chapter").mkdir(parents=True, exist_ok=True)
        (where / "thesis.tex").write_bytes(b"years of work")
        (where / "chapter" / "one.tex").write_bytes(b"more")
        return {p: p.read_bytes() for p in where.rglob("*") if p.is_file()}

    def rearm(self) -> None:
        """The attempt recorded RUNNING again with its cleanup marker (a received ledger says what it likes)."""
        (point_id,) = self.paths.point_ids_on_disk()
        with sqlite3.connect(self.paths.ledger) as db:
            db.execute("UPDATE attempts SET state = ?, pid = NULL WHERE point_id = ? AND attempt = 1",
                       (State.RUNNING.value, point_id))
        self.paths.cleanup.mkdir(exist_ok=True)
        self.paths.cleanup_marker(point_id, 1).touch()


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink()) if path.exists() else []


@pytest.fixture
def study(tmp_path: Path) -> Study:
    s = Study(tmp_path)
    api.submit(s.sweep, "local", s.results)
    # the control: the killed worker's files, in both places, were removed by the submit itself
    assert files_under(s.fs) == [] and files_under(s.tier) == []
    assert s.paths.pending_cleanups() == []
    return s


def _absolute(s: Study) -> dict[Path, bytes]:
    files = s.victim(s.home / "thesis")
    s.plant_task(filesystem_path=str(s.home), study="thesis", data_key="", point_id=".")  # data_dir: the thesis
    return files


def _dotdot(s: Study) -> dict[Path, bytes]:
    files = s.victim(s.home / "thesis")
    s.plant_task(study="../home/thesis", data_key="", point_id=".")
    return files


def _tier_outside(s: Study) -> dict[Path, bytes]:
    files = s.victim(s.home / "thesis")
    s.plant_task(tier_path=str(s.home), study="thesis", data_key="", point_id=".")
    return files


def _study_dir_link(s: Study) -> dict[Path, bytes]:
    """The study's own data directory name, planted as a link to the user's home (task.json untouched)."""
    task = s.task
    files = s.victim(s.home / task.point_id)
    task.data_dir.parent.symlink_to(s.home, target_is_directory=True)
    return files


def _point_dir_link(s: Study) -> dict[Path, bytes]:
    task = s.task
    files = s.victim(s.home / "thesis")
    task.data_dir.parent.mkdir(parents=True)
    task.data_dir.symlink_to(s.home / "thesis", target_is_directory=True)
    return files


def _tier_link(s: Study) -> dict[Path, bytes]:
    task = s.task
    files = s.victim(s.home / "thesis")
    tier_point = task.places[1].path
    tier_point.parent.mkdir(parents=True)
    tier_point.symlink_to(s.home / "thesis", target_is_directory=True)
    return files


def _other_study(s: Study) -> dict[Path, bytes]:
    """Another study's data (same name, another results directory): the task names its key."""
    other_key = data_key(s.results.parent / "elsewhere" / "scope")
    theirs = s.fs / f"scope.{other_key}" / s.task.point_id
    files = s.victim(theirs)
    s.plant_task(data_key=other_key)
    return files


PLANTS: dict[str, Callable[[Study], dict[Path, bytes]]] = {
    "absolute": _absolute, "dotdot": _dotdot, "tier-outside": _tier_outside, "study-dir-link": _study_dir_link,
    "point-dir-link": _point_dir_link, "tier-link": _tier_link, "other-study": _other_study}


def run(command: str, s: Study) -> None:
    if command == "status":
        api.status("scope", s.results)
    elif command == "cancel":
        api.cancel("scope", s.results)
    elif command == "submit":
        api.submit(s.sweep, "local", s.results)
    else:
        api.resubmit("scope", s.results)


@pytest.mark.parametrize("command", ["status", "cancel", "submit", "resubmit"])
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_place_is_never_removed(study: Study, plant: str, command: str) -> None:
    files = PLANTS[plant](study)
    study.rearm()
    run(command, study)
    assert {p: p.read_bytes() for p in files} == files, "the victim's files are intact"
    assert all(p.is_file() for p in files)
    assert study.paths.pending_cleanups() == [], "refused once, and not tried again"


def test_status_says_why_it_left_a_planted_place(study: Study) -> None:
    _absolute(study)
    study.rearm()
    report = api.status("scope", study.results)
    assert report.backend_note is not None and str(study.task_file) in report.backend_note
    assert "not removed" in report.backend_note


def test_the_study_own_leftovers_are_removed_by_a_later_status(study: Study) -> None:
    """The control for every case above: the same commands do remove what is provably the study's."""
    task = study.task
    for place in task.places:
        (place.path / "global_step1").mkdir(parents=True)
        (place.path / "global_step1" / "model.pt").write_bytes(b"left by a kill")
    study.rearm()
    api.status("scope", study.results)
    assert files_under(study.fs) == [] and files_under(study.tier) == []
    assert study.paths.pending_cleanups() == []


def test_a_ledger_row_whose_config_is_not_the_point_removes_nothing(study: Study) -> None:
    """The ledger says the point writes elsewhere: its configuration no longer hashes to its id, so it is refused."""
    task = study.task
    for place in task.places:
        (place.path / "global_step1").mkdir(parents=True)
        (place.path / "global_step1" / "model.pt").write_bytes(b"kept: unprovable")
    with sqlite3.connect(study.paths.ledger) as db:
        db.execute("UPDATE points SET config = json_set(config, '$.filesystem', 'nodetier')")
    study.rearm()
    report = api.status("scope", study.results)
    assert len(files_under(study.fs)) == 1 and len(files_under(study.tier)) == 1
    assert report.backend_note is not None and "hashes to" in report.backend_note


def test_a_sweep_mount_path_that_is_a_link_is_followed(tmp_path: Path) -> None:
    """The sweep's own filesystem path may be a link (/scratch → /mnt/scratch): only below it are links refused."""
    s = Study(tmp_path)
    real = tmp_path / "real-fs"
    s.fs.rmdir()
    real.mkdir()
    s.fs.symlink_to(real, target_is_directory=True)
    api.submit(s.sweep, "local", s.results)
    assert files_under(real) == [] and files_under(s.tier) == []
    assert os.path.islink(s.fs)
