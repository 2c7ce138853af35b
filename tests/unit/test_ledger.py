"""The ledger: attempts and history, final states that stay final, concurrent readers and writers."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from studyctl.attempt.records import Handle, Update
from studyctl.states import FailureClass, State
from studyctl.study.ledger import Ledger


def _seed(ledger: Ledger, n: int = 3) -> None:
    ledger.sync_points((f"p{i}", i, {"i": i}, False, None) for i in range(n))


def test_attempts_and_history(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        _seed(ledger)
        first = ledger.new_attempts([("p0", "local"), ("p1", "local")])
        assert first == {"p0": 1, "p1": 1}
        ledger.record_handles([("p0", 1, Handle(pid=123))])
        ledger.record_updates([Update("p0", 1, State.RUNNING), Update("p0", 1, State.FAILED, FailureClass.IO_ERROR,
                                                                      "disk full", exit_code=3)])
        again = ledger.new_attempts([("p0", "local")])
        assert again == {"p0": 2}
        ledger.record_updates([Update("p0", 2, State.COMPLETED)], {("p0", 2): "/r.json"})
        attempts = ledger.attempts("p0")
        assert [(a.attempt, a.state, a.failure_class, a.reason) for a in attempts] == [
            (1, State.FAILED, "io_error", "disk full"), (2, State.COMPLETED, None, None)]
        assert attempts[0].pid == 123 and attempts[0].exit_code == 3
        states = {p.point_id: p.state for p in ledger.points()}
        assert states == {"p0": State.COMPLETED, "p1": State.SUBMITTED, "p2": State.PLANNED}
        assert [e[1] for e in ledger.events("p0")] == ["SUBMITTED", "RUNNING", "FAILED", "SUBMITTED", "COMPLETED"]


def test_final_states_only_yield_to_completed(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        _seed(ledger, 1)
        ledger.new_attempts([("p0", "slurm")])
        ledger.record_updates([Update("p0", 1, State.CANCELLED)])
        ledger.record_updates([Update("p0", 1, State.RUNNING), Update("p0", 1, State.FAILED)])
        assert ledger.points()[0].state is State.CANCELLED
        ledger.record_updates([Update("p0", 1, State.COMPLETED)])
        assert ledger.points()[0].state is State.COMPLETED


def test_points_leaving_the_sweep_are_kept_but_hidden(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        _seed(ledger, 3)
        new = ledger.sync_points([("p0", 0, {}, False, None), ("p9", 1, {}, True, "why")])
        assert new == 1
        assert [p.point_id for p in ledger.points()] == ["p0", "p9"]
        assert len(ledger.points(only_in_sweep=False)) == 4



def test_syncing_the_same_sweep_again_writes_nothing_and_changes_still_land(tmp_path: Path) -> None:
    rows = [(f"p{i}", i, {"i": i}, False, None) for i in range(3)]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.sync_points(rows)
        before = ledger._db.total_changes
        assert ledger.sync_points(rows) == 0
        assert ledger._db.total_changes == before  # the same sweep again: no row written
        ledger.sync_points(rows[:2])  # p2 leaves the sweep
        assert [p.point_id for p in ledger.points()] == ["p0", "p1"]
        ledger.sync_points([(pid, 5 - order, cfg, pid == "p1", "why" if pid == "p1" else None)
                            for pid, order, cfg, _, _ in rows])  # p2 back, the order reversed, p1 excluded
        assert [p.point_id for p in ledger.points()] == ["p2", "p1", "p0"]
        back = {p.point_id: p for p in ledger.points()}
        assert back["p1"].excluded and back["p1"].exclude_reason == "why" and not back["p0"].excluded


def _writer(path: str, start: int) -> None:
    with Ledger(Path(path)) as ledger:
        for i in range(start, start + 50):
            ledger.new_attempts([(f"p{i % 5}", "local")])


def test_concurrent_writers_and_readers(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        _seed(ledger, 5)
    procs = [multiprocessing.Process(target=_writer, args=(str(path), k * 50)) for k in range(3)]
    for p in procs:
        p.start()
    with Ledger(path) as reader:
        while any(p.is_alive() for p in procs):
            assert len(reader.points()) == 5
    for p in procs:
        p.join()
        assert p.exitcode == 0
    with Ledger(path) as ledger:
        assert len(ledger.attempts()) == 150
        assert sorted(p.attempts for p in ledger.points()) == [30] * 5


def test_state_counts_match_points(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.sync_points([("a", 0, {}, False, None), ("b", 1, {}, False, None), ("c", 2, {}, True, "x")])
        ledger.new_attempts([("a", "local")])
        ledger.record_updates([Update("a", 1, State.FAILED)])
        ledger.new_attempts([("a", "local")])
        assert ledger.state_counts() == {"SUBMITTED": 1, "PLANNED": 1, "EXCLUDED": 1}
