"""What the ledger's rollback journal (PERSIST, synchronous FULL) costs against the WAL it replaced.

WAL readers map a `-shm` index that a full 1 KiB-block disk cannot back (SIGBUS); a PERSIST ledger is read
without writing anything. Both run through the real `Ledger` class side by side in one run, only its
connection differs (WAL + synchronous NORMAL was the old one). Ratio = PERSIST / WAL, per operation:
  sync        record a 10,000-point sweep (one transaction)
  update      one attempt's state change (one transaction: what a runner does per point and state)
  read        open read-only, check the file and read every point (what status and collect do)
`python -m benchmarks ledger [repeat]`.
"""

from __future__ import annotations

import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from studyctl.attempt.records import Update
from studyctl.states import State
from studyctl.study import ledger as ledger_module
from studyctl.study.ledger import Ledger

POINTS = 10_000
UPDATES = 200
CONFIG = {"checkpoint": {"scale": 0.001}, "filesystem": "scratch", "io_mode": "buffered",
          "model": {"name": "gpt2-125m"}, "nodes": 1, "pipeline_parallel": 1, "ranks_per_node": 1,
          "repetition": 0, "tensor_parallel": 1, "zero_stage": 0}


def _wal(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=30000")
    return db


def _wal_reader(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=30, isolation_level=None)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _run(directory: Path) -> dict[str, float]:
    path = directory / "ledger.sqlite"
    rows = [(f"p{i:06d}", i, {**CONFIG, "repetition": i}, False, None) for i in range(POINTS)]
    with Ledger(path) as ledger:
        out = {"sync": _timed(lambda: ledger.sync_points(rows))}
        ids = [r[0] for r in rows[:UPDATES]]
        numbers = ledger.new_attempts([(p, "local") for p in ids], State.SUBMITTED)
        updates = [Update(p, numbers[p], State.RUNNING) for p in ids]
        out["update"] = _timed(lambda: [ledger.record_updates([u]) for u in updates]) / UPDATES

    def read() -> None:
        with Ledger(path, readonly=True) as ledger:
            ledger.check()
            ledger.points()

    out["read"] = _timed(read)
    return out


def main(repeat: int = 5) -> None:
    results: dict[str, dict[str, list[float]]] = {"wal": {}, "persist": {}}
    persist, reader = ledger_module._connect_for_writes, ledger_module._connect_read_only
    for _ in range(repeat):
        for journal in ("wal", "persist"):
            ledger_module._connect_for_writes = _wal if journal == "wal" else persist  # type: ignore[assignment]
            ledger_module._connect_read_only = _wal_reader if journal == "wal" else reader  # type: ignore[assignment]
            directory = Path(tempfile.mkdtemp(prefix=f"ledger-{journal}-", dir="/var/tmp"))
            try:
                for op, seconds in _run(directory).items():
                    results[journal].setdefault(op, []).append(seconds)
            finally:
                shutil.rmtree(directory)
    ledger_module._connect_for_writes, ledger_module._connect_read_only = persist, reader  # type: ignore[assignment]
    print(f"\n## Ledger journal: PERSIST vs WAL ({POINTS} points, {UPDATES} updates, median of {repeat})\n")
    print("| operation | WAL ms | PERSIST ms | ratio |\n|---|---|---|---|")
    for op in results["wal"]:
        wal, per = statistics.median(results["wal"][op]) * 1e3, statistics.median(results["persist"][op]) * 1e3
        print(f"| {op} | {wal:.2f} | {per:.2f} | {per / wal:.2f} |")
