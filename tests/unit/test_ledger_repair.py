"""A missing, emptied or damaged ledger never destroys results: attempt directories are evidence, never
overwritten; the ledger is rebuilt from them with a message, and read-only commands refuse in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studyctl import api
from studyctl.errors import UserError
from studyctl.states import State
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.unit.fakes import FakeBackend, FakeSupervisor, registered, study_paths, write_sweep


def completed_study(tmp_path: Path, sup: FakeSupervisor) -> tuple[Path, Path, dict[Path, int]]:
    """A study whose four points completed; the mtimes of its result files."""
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, sup.name, results)
    files = {la.paths.result: la.paths.result.stat().st_mtime_ns for la in sup.launched}
    assert len(files) == 4
    return sweep, results, files


def lose_ledger(results: Path, how: str) -> None:
    ledger = study_paths(results).ledger
    for side in ledger.parent.glob("ledger.sqlite-*"):
        side.unlink()
    if how == "deleted":
        ledger.unlink()
    elif how == "empty":
        ledger.write_bytes(b"")
    else:
        ledger.write_bytes(b"this is not a database, it was overwritten by a careless cp\n" * 100)


@pytest.mark.parametrize("how", ["deleted", "empty", "damaged"])
def test_submit_after_losing_the_ledger_rebuilds_it_and_overwrites_nothing(tmp_path: Path, how: str) -> None:
    with registered(FakeSupervisor()) as sup:
        sweep, results, files = completed_study(tmp_path, sup)
        lose_ledger(results, how)
        rep = api.submit(sweep, sup.name, results)
    assert rep.launched == 0 and rep.skipped_completed == 4 and len(sup.launched) == 4
    assert {p: p.stat().st_mtime_ns for p in files} == files  # every result.json untouched
    assert any("4 attempts on disk were missing from the ledger" in n for n in rep.notes), rep.notes
    if how == "damaged":
        assert any("damaged" in n and "kept as ledger.sqlite.damaged-" in n for n in rep.notes), rep.notes
        assert list(study_paths(results).root.glob("ledger.sqlite.damaged-*"))
    status = api.status("s", results)
    assert status.counts == {"COMPLETED": 4}
    assert all(p.latest and p.latest.result_path and Path(p.latest.result_path).is_file() for p in status.points)


def test_status_rebuilds_a_deleted_ledger_and_says_so(tmp_path: Path) -> None:
    with registered(FakeSupervisor()) as sup:
        _, results, _ = completed_study(tmp_path, sup)
        lose_ledger(results, "deleted")
        proc = run_cli("sweep", "status", "s", "--results", str(results), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["counts"] == {"COMPLETED": 4}
    assert "restored from their directories" in data["notes"][0]


def test_new_attempts_are_numbered_above_every_directory_on_disk(tmp_path: Path) -> None:
    """The ledger forgot attempts 2 and 3 of a point (restored from an old backup, say): they are not reused."""
    with registered(FakeBackend()) as fake:
        sweep, results = write_sweep(tmp_path), tmp_path / "results"
        api.submit(sweep, "fake", results)
        point = fake.launched[0]
        fake.states[point.point_id] = State.FAILED
        api.status("s", results)
        paths = study_paths(results)
        kept = paths.attempt(point.point_id, 2).dir
        kept.mkdir()
        (kept / "notes.txt").write_text("not ours: no task.json, still never overwritten")
        api.resubmit("s", results)
    assert fake.launched[-1].point_id == point.point_id and fake.launched[-1].attempt == 3
    assert (kept / "notes.txt").is_file() and not paths.attempt(point.point_id, 2).task.exists()


def test_an_attempt_the_ledger_lost_while_it_ran_is_not_started_again(tmp_path: Path) -> None:
    with registered(FakeBackend()) as fake:
        sweep, results = write_sweep(tmp_path), tmp_path / "results"
        api.submit(sweep, "fake", results)
        fake.states.update({la.point_id: State.RUNNING for la in fake.launched})
        lose_ledger(results, "deleted")
        rep = api.submit(sweep, "fake", results)
        assert rep.launched == 0 and rep.skipped_active == 4 and len(fake.launched) == 4
        with Ledger(study_paths(results).ledger) as ledger:
            assert {a.state for a in ledger.attempts()} == {State.RUNNING}


def test_collect_refuses_a_damaged_ledger_in_one_line(tmp_path: Path) -> None:
    with registered(FakeSupervisor()) as sup:
        _, results, _ = completed_study(tmp_path, sup)
    lose_ledger(results, "damaged")
    with pytest.raises(UserError, match=r"ledger.sqlite: cannot be read .*'studyctl sweep status s' rebuilds it"):
        api.collect("s", results)
