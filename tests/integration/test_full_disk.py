"""A full or read-only results filesystem (a real small tmpfs): one line, nothing measured lost, never LOST.

The backend is a fake at the process boundary (it plays a worker that wrote its result file); the ledger,
the result files and the filesystem are real."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from studyctl import api as study
from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.states import State
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.tmpfs import small_tmpfs as mounted_tmpfs
from tests.unit.fakes import FakeSupervisor, registered, write_sweep


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path, "4m") as mnt:
        yield mnt


def fill(directory: Path) -> Path:
    """Write a file until the filesystem has not one byte left; returns it."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as fh:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


class FillsTheDisk(FakeSupervisor):
    """Each point's worker writes its result; right after the `full_after`-th point's, the results filesystem is
    full, so the ledger update saying COMPLETED cannot be written. `frees`: space comes back before the next point."""

    name = "fills"
    runs_to_completion: ClassVar[bool] = True

    def __init__(self, mount: Path, full_after: int, frees: bool = False) -> None:
        super().__init__()
        self.mount, self.full_after, self.frees = mount, full_after, frees
        self.filler: Path | None = None

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        for launch in launches:
            if self.frees and self.filler is not None:
                self.filler.unlink()
                self.filler = None
            self.launched.append(launch)
            record_handle(launch, Handle(pid=4242))
            record_update(Update(launch.point_id, launch.attempt, State.RUNNING))
            self.finish(launch)
            if len(self.launched) == self.full_after:
                # The ledger's persistent journal keeps the room its past transactions needed, so a small update
                # fits even on a full disk. Without it (a disk that filled before the journal grew), it cannot.
                for journal in self.mount.glob("results/*/ledger.sqlite-journal"):
                    journal.unlink()
                self.filler = fill(self.mount)
            record_update(Update(launch.point_id, launch.attempt, State.COMPLETED))


def ledger_states(results: Path) -> dict[str, State]:
    with Ledger(results / "s" / "ledger.sqlite", readonly=True) as ledger:
        return {a.point_id: a.state for a in ledger.latest_attempts()}


def test_a_full_results_disk_is_one_line_and_keeps_what_was_measured(tmp_path: Path, small_tmpfs: Path) -> None:
    sweep, results = write_sweep(tmp_path), small_tmpfs / "results"
    backend = FillsTheDisk(small_tmpfs, full_after=4)
    with registered(backend):
        full = run_cli("sweep", "submit", str(sweep), "--backend", "fills", "--results", str(results))
        assert full.returncode == 1 and "Traceback" not in full.stdout + full.stderr
        line = " ".join(full.stderr.split())
        assert "ledger.sqlite: cannot be updated (database or disk is full)" in line
        assert "results already written are kept" in line
        last = backend.launched[3]
        assert ledger_states(results)[last.point_id] is State.RUNNING  # the update that failed

        shown = run_cli("sweep", "status", "s", "--results", str(results), "--json")  # still full
        assert shown.returncode == 0, shown.stderr
        rep = study.status("s", results)
        assert {p.point_id: p.state for p in rep.points}[last.point_id] is State.COMPLETED
        assert rep.counts == {State.COMPLETED.value: 4}
        assert any("database or disk is full" in note for note in rep.notes)

        assert backend.filler is not None
        backend.filler.unlink()  # space again: the next command writes the ledger from the result files
        rep = study.status("s", results)
        assert not rep.notes and ledger_states(results)[last.point_id] is State.COMPLETED
        again = run_cli("sweep", "submit", str(sweep), "--backend", "fills", "--results", str(results))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "states: COMPLETED 4" in again.stdout and len(backend.launched) == 4  # nothing measured twice


def test_a_ledger_update_the_full_disk_refused_is_retried_once_there_is_space(tmp_path: Path,
                                                                             small_tmpfs: Path) -> None:
    sweep, results = write_sweep(tmp_path), small_tmpfs / "results"
    with registered(FillsTheDisk(small_tmpfs, full_after=2, frees=True)) as backend:
        proc = run_cli("sweep", "submit", str(sweep), "--backend", "fills", "--results", str(results))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(backend.launched) == 4  # the runner went on with the study
    assert set(ledger_states(results).values()) == {State.COMPLETED}


def test_a_full_disk_before_anything_is_written_is_one_line(tmp_path: Path, small_tmpfs: Path) -> None:
    sweep, results = write_sweep(tmp_path), small_tmpfs / "results"
    fill(small_tmpfs)
    proc = run_cli("sweep", "submit", str(sweep), "--results", str(results))
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    line = " ".join(proc.stderr.split())
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{results}/s/.lock: No space left on device: the filesystem is full" in line  # names where


def test_a_lost_attempt_whose_result_is_on_disk_is_completed(tmp_path: Path) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(FakeSupervisor()) as backend:
        study.submit(sweep, "fakelocal", results)
    done = backend.launched[0]
    with Ledger(results / "s" / "ledger.sqlite") as ledger:  # e.g. a scheduler that forgot a finished job
        ledger._db.execute("UPDATE attempts SET state = 'LOST' WHERE point_id = ?", (done.point_id,))
    rep = study.status("s", results)
    assert {p.point_id: p.state for p in rep.points}[done.point_id] is State.COMPLETED


def test_status_of_a_read_only_results_directory(tmp_path: Path, small_tmpfs: Path) -> None:
    sweep, results = write_sweep(tmp_path), small_tmpfs / "results"
    with registered(FakeSupervisor()):
        study.submit(sweep, "fakelocal", results)
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    shown = run_cli("sweep", "status", "s", "--results", str(results))
    assert shown.returncode == 0, shown.stderr
    assert "COMPLETED 4" in shown.stdout and "is read-only" in shown.stdout
    assert '"COMPLETED": 4' in run_cli("sweep", "status", "s", "--results", str(results), "--json").stdout
    nothing = run_cli("sweep", "cancel", "s", "--results", str(results))  # reading the ledger writes nothing
    assert nothing.returncode == 0 and "cancelled 0 attempts" in nothing.stdout, nothing.stdout + nothing.stderr
    for args in (("sweep", "submit", str(sweep)), ("sweep", "resubmit", "s")):
        proc = run_cli(*args, "--results", str(results))
        assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, args
        assert len(proc.stderr.strip().splitlines()) == 1 and str(results) in proc.stderr, args
