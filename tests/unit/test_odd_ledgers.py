"""Adversary: a valid SQLite ledger that studyctl never wrote (an unknown state, a column dropped, added or
retyped, a config that is not JSON or lacks a setting, a trigger that aborts writes, a view for a table,
attempt numbers out of range). Commands that write the ledger move it aside and rebuild it from the attempt
directories, saying so; commands that only read refuse it in one line. Never a traceback."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from studyctl import api
from studyctl.attempt.paths import MAX_ATTEMPT, attempt_number
from studyctl.states import State
from studyctl.study.ledger import Ledger
from studyctl.study.status import read_points
from tests.cli import CliRun, run_cli
from tests.unit.fakes import FakeSupervisor, registered, study_paths, write_sweep

ODD: dict[str, str] = {
    "unknown state": "UPDATE attempts SET state = 'HALF_DONE' WHERE rowid = 1",
    "lower-case state": "UPDATE attempts SET state = 'completed' WHERE rowid = 2",
    "missing column": "ALTER TABLE attempts DROP COLUMN reason",
    "extra column": "ALTER TABLE points ADD COLUMN owner TEXT NOT NULL DEFAULT 'me'",
    "retyped column": "ALTER TABLE events RENAME TO e0; CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                      "point_id TEXT NOT NULL, attempt INTEGER NOT NULL, state TEXT NOT NULL, at TEXT NOT NULL, "
                      "detail TEXT); DROP TABLE e0",
    "text in a number column": "UPDATE attempts SET submitted_at = 'yesterday' WHERE rowid = 1",
    "blob config": "UPDATE points SET config = x'00ff' WHERE rowid = 1",
    "non-JSON config": "UPDATE points SET config = '{\"model\": ' WHERE rowid = 1",
    "config not an object": "UPDATE points SET config = '[1, 2, 3]' WHERE rowid = 2",
    "config without a setting": "UPDATE points SET config = json_remove(config, '$.nodes') WHERE rowid = 1",
    "config without a model name": "UPDATE points SET config = json_remove(config, '$.model.name') WHERE rowid = 1",
    "config with a number for a name": "UPDATE points SET config = json_set(config, '$.filesystem', 7)",
    "aborting trigger": "CREATE TRIGGER no_updates BEFORE UPDATE ON attempts BEGIN SELECT RAISE(ABORT, 'no'); END",
    "aborting insert trigger": "CREATE TRIGGER no_inserts BEFORE INSERT ON events BEGIN SELECT RAISE(FAIL, 'x'); END",
    "huge attempt number": f"UPDATE attempts SET attempt = {MAX_ATTEMPT + 1} WHERE rowid = 1",
    "negative attempt": "UPDATE attempts SET attempt = -1 WHERE rowid = 1",
    "zero attempt": "UPDATE attempts SET attempt = 0 WHERE rowid = 3",
    "a table missing": "DROP TABLE events",
    "a view instead of a table": "DROP TABLE meta; CREATE VIEW meta AS SELECT 'backend' AS key, 'x' AS value",
    "a unique index": "CREATE UNIQUE INDEX one_detail ON events(detail)",
    "an index missing": "DROP INDEX attempts_state",
}


def completed(tmp_path: Path, sup: FakeSupervisor) -> tuple[Path, Path]:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, sup.name, results)
    assert api.status("s", results).counts == {"COMPLETED": 4}
    return sweep, results


def spoil(results: Path, sql: str) -> None:
    db = sqlite3.connect(study_paths(results).ledger, isolation_level=None)
    db.executescript(sql)
    db.close()


def one_line_failure(proc: CliRun) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return " ".join(proc.stderr.split())


@pytest.mark.parametrize("case", sorted(ODD))
def test_an_odd_ledger_is_refused_by_collect_and_rebuilt_by_status(tmp_path: Path, case: str) -> None:
    with registered(FakeSupervisor()) as sup:
        _, results = completed(tmp_path, sup)
        spoil(results, ODD[case])
        journal = study_paths(results).ledger_side_files[0]
        journal.write_bytes(b"the odd file's journal: never to be played into the rebuilt ledger")
        line = one_line_failure(run_cli("collect", "s", "--results", str(results)))
        assert "ledger.sqlite: cannot be read" in line and "'studyctl sweep status s' rebuilds it" in line
        shown = run_cli("sweep", "status", "s", "--results", str(results), "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["counts"] == {"COMPLETED": 4}, data
    assert any("damaged" in n and "kept as ledger.sqlite.damaged-" in n for n in data["notes"]), data["notes"]
    aside = [p.name for p in study_paths(results).root.glob("ledger.sqlite.damaged-*")]
    assert len(aside) == 2 and any(name.endswith("-journal") for name in aside), aside  # its journal went with it
    with Ledger(study_paths(results).ledger) as ledger:
        ledger.check()  # the rebuilt one is a ledger again


SPOILERS: dict[str, Callable[[Path, Path], object]] = {
    "submit": lambda sweep, results: api.submit(sweep, "fakelocal", results),
    "resubmit": lambda sweep, results: api.resubmit("s", results),
    "cancel": lambda sweep, results: api.cancel("s", results),
}


@pytest.mark.parametrize("command", sorted(SPOILERS))
@pytest.mark.parametrize("case", ["unknown state", "aborting trigger", "non-JSON config", "a view instead of a table"])
def test_commands_that_write_rebuild_an_odd_ledger_and_lose_nothing(tmp_path: Path, command: str, case: str) -> None:
    with registered(FakeSupervisor()) as sup:
        sweep, results = completed(tmp_path, sup)
        spoil(results, ODD[case])
        SPOILERS[command](sweep, results)
        assert len(sup.launched) == 4  # nothing measured twice
        assert api.status("s", results).counts == {"COMPLETED": 4}
    assert len(list(study_paths(results).root.glob("ledger.sqlite.damaged-*"))) == 1


@pytest.mark.parametrize("name", ["attempt-99999999999999999999", f"attempt-{MAX_ATTEMPT + 1}", "attempt-0",
                                  "attempt-007", "attempt--1", "attempt-+3", "attempt-1e9", "attempt-٣"])
def test_an_attempt_directory_with_an_odd_number_is_not_an_attempt(tmp_path: Path, name: str) -> None:
    """Before: OverflowError in status (a number too big for SQLite). A copy of a real attempt under that name,
    the ledger lost: status rebuilds from the real attempts and leaves the odd directory alone."""
    assert attempt_number(name) is None
    with registered(FakeSupervisor()) as sup:
        _, results = completed(tmp_path, sup)
        first = sup.launched[0]
        odd = first.paths.dir.with_name(name)
        shutil.copytree(first.paths.dir, odd)
        study_paths(results).ledger.unlink()
        shown = run_cli("sweep", "status", "s", "--results", str(results), "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["counts"] == {"COMPLETED": 4}
        with Ledger(study_paths(results).ledger) as ledger:
            assert {a.attempt for a in ledger.attempts()} == {1}
        api.resubmit("s", results, states=[State.COMPLETED], point_ids=[first.point_id], backend="fakelocal")
    assert sup.launched[-1].attempt == 2 and (odd / "result.json").is_file()


def test_the_largest_attempt_number_on_disk_is_restored(tmp_path: Path) -> None:
    with registered(FakeSupervisor()) as sup:
        _, results = completed(tmp_path, sup)
        first = sup.launched[0]
        top = first.paths.dir.with_name(f"attempt-{MAX_ATTEMPT}")
        shutil.copytree(first.paths.dir, top)
        assert api.status("s", results).counts == {"COMPLETED": 4}  # restored from disk, a known number
        with Ledger(study_paths(results).ledger) as ledger:
            assert max(a.attempt for a in ledger.attempts()) == MAX_ATTEMPT
        proc = run_cli("sweep", "resubmit", "s", "--state", "COMPLETED", "--point", first.point_id, "--backend",
                       sup.name, "--results", str(results))
        assert len(sup.launched) == 4  # no attempt number past the last, no directory written twice
    assert "the last number an attempt may have" in one_line_failure(proc)


KILLED_MID_TRANSACTION = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=PERSIST")
db.execute("PRAGMA cache_size=1")  # pages spill into the file before the commit, as a big transaction's do
db.execute("BEGIN IMMEDIATE")
db.execute("UPDATE attempts SET state = 'FAILED', reason = hex(randomblob(2000))")
os._exit(9)
"""


def test_collect_reads_the_ledger_as_before_a_writer_killed_mid_transaction(tmp_path: Path) -> None:
    """A hot journal (kill -9 mid-commit): a read-only open cannot play it back; collect still reads the ledger,
    and sees none of the half-made transaction."""
    with registered(FakeSupervisor()) as sup:
        _, results = completed(tmp_path, sup)
    paths = study_paths(results)
    subprocess.run([sys.executable, "-c", KILLED_MID_TRANSACTION, str(paths.ledger)], check=False, timeout=60)
    assert paths.ledger_side_files[0].stat().st_size > 0
    rows = read_points(paths)  # what collect reads
    assert [r.state.value for r in rows] == ["COMPLETED"] * 4 and not any(r.latest and r.latest.reason for r in rows)
