"""A study directory whose ledger is not a file (a FIFO, a directory): one line from every command, no hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from studyctl import api
from tests.cli import run_cli
from tests.unit.fakes import FakeSupervisor, registered, write_sweep


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_ledger_that_is_not_a_file_is_one_line_and_never_blocks(tmp_path: Path, kind: str) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(FakeSupervisor()):
        api.submit(sweep, "fakelocal", results)
    ledger = results / "s" / "ledger.sqlite"
    ledger.unlink()
    if kind == "fifo":
        os.mkfifo(ledger)
    else:
        ledger.mkdir()
    for args in (("collect", "s"), ("sweep", "status", "s"), ("sweep", "cancel", "s"), ("sweep", "resubmit", "s")):
        proc = run_cli(*args, "--results", str(results), subprocess_=True, timeout=60)  # a FIFO blocked collect
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert " ".join(proc.stderr.split()) == (f"studyctl: error: {ledger}: not a regular file, so not a ledger; "
                                                 "move it away and 'studyctl sweep status' rebuilds the ledger "
                                                 "from the attempt directories"), args
