"""Adversary: a full results filesystem with 1 KiB blocks (a real loop-mounted ext4; mkfs.ext4's default below
512 MiB). A WAL-mode SQLite reader maps its `-shm` index, which it extends one byte per 4 KiB page: on such a
disk, with a few blocks left, the other three quarters of each page cannot be backed and the reader dies of
SIGBUS. The ledger is not WAL any more: at every fill level, status shows the states, and submit, resubmit,
cancel and collect finish or say in one line why not. Never a signal, never a traceback.

The disk is freed one block at a time from completely full; a plain SQLite WAL reader beside the study is the
control that proves the scan crosses the levels where the old ledger died."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from studyctl import api
from tests.cli import CliRun, run_cli
from tests.tmpfs import small_ext4
from tests.unit.fakes import FakeSupervisor, registered, study_paths, write_sweep
from tests.unit.test_odd_ledgers import KILLED_MID_TRANSACTION

WAL_READER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
print(db.execute("SELECT COUNT(*) FROM t").fetchone()[0])
"""
MAX_STEPS = 48  # 1 KiB blocks freed one by one: past the 32 KiB a WAL index needs


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_ext4(tmp_path, size_mib=8) as mnt:
        yield mnt


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as fh:
        for chunk in (1 << 20, 4096, 1024, 1):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


def wal_control(disk: Path) -> Path:
    path = disk / "control.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t(x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.close()
    return path


def control_signal(control: Path) -> int | None:
    """The signal a plain WAL reader of `control` dies of now, if any; its side files are removed after."""
    proc = subprocess.run([sys.executable, "-c", WAL_READER, str(control)], capture_output=True, timeout=60)
    for side in ("-shm", "-wal"):
        control.with_name(control.name + side).unlink(missing_ok=True)
    return -proc.returncode if proc.returncode < 0 else None


def finished_or_one_line(proc: CliRun, what: str) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, (what, proc.stderr)
    assert proc.returncode in (0, 1), (what, proc.returncode, proc.stdout, proc.stderr)
    if proc.returncode == 1:
        lines = [line for line in proc.stderr.splitlines() if line.startswith("studyctl: error:")]
        assert len(lines) == 1, (what, proc.stderr)


def commands(sweep: Path, results: Path) -> dict[str, tuple[str, ...]]:
    r = ("--results", str(results))
    return {"submit": ("sweep", "submit", str(sweep), "--backend", "fakelocal", *r),
            "resubmit": ("sweep", "resubmit", "s", "--backend", "fakelocal", *r),
            "cancel": ("sweep", "cancel", "s", *r),
            "collect": ("collect", "s", *r)}


@pytest.mark.parametrize("ledger_as", ["written by studyctl", "left in WAL mode by an older studyctl"])
def test_a_full_1k_block_disk_never_kills_a_command(tmp_path: Path, disk: Path, ledger_as: str) -> None:
    sweep, results = write_sweep(tmp_path), disk / "results"
    with registered(FakeSupervisor()) as sup:
        api.submit(sweep, sup.name, results)
        ledger = study_paths(results).ledger
        if ledger_as.startswith("left in WAL"):
            with sqlite3.connect(ledger, isolation_level=None) as db:
                db.execute("PRAGMA journal_mode=WAL")
            db.close()
        control = wal_control(disk)
        filler = fill(disk)
        crashed_control, shown = [], 0
        for step in range(MAX_STEPS):
            level = os.statvfs(disk).f_bfree
            if control_signal(control) == signal.SIGBUS:
                crashed_control.append(level)
            status = run_cli("sweep", "status", "s", "--results", str(results), "--json")
            assert status.returncode == 0 and "Traceback" not in status.stderr, (level, status.stderr)
            assert json.loads(status.stdout)["counts"] == {"COMPLETED": 4}, (level, status.stdout)
            shown += 1
            for what, args in commands(sweep, results).items():
                if what != "collect" or step % 8 == 0:  # collect is slow; every 8th level
                    finished_or_one_line(run_cli(*args), f"{what} with {level} blocks free")
            os.truncate(filler, max(0, filler.stat().st_size - 1024))
    assert shown == MAX_STEPS and len(sup.launched) == 4  # nothing measured twice
    assert crashed_control, "the scan never reached a level where a WAL reader dies of SIGBUS"


def test_a_half_made_change_on_a_read_only_mount_is_never_read(tmp_path: Path, disk: Path) -> None:
    """A writer killed mid-transaction left its journal; then the filesystem went read-only, so nobody can play
    the journal back. Reading the file as it stands would show half a change: one line instead."""
    sweep, results = write_sweep(tmp_path), disk / "results"
    with registered(FakeSupervisor()) as sup:
        api.submit(sweep, sup.name, results)
    ledger = study_paths(results).ledger
    subprocess.run([sys.executable, "-c", KILLED_MID_TRANSACTION, str(ledger)], check=False, timeout=60)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    for args in (("collect", "s"), ("sweep", "status", "s", "--json")):
        proc = run_cli(*args, "--results", str(results))
        assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, (args, proc.stdout)
        assert "ledger.sqlite: cannot be read" in " ".join(proc.stderr.split()), (args, proc.stderr)
