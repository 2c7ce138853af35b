"""The study ledger: every point and every attempt, crash-safe (SQLite, one transaction per change).

A `kill -9` or a power cut at any moment leaves either the old or the new row, never half of one; the next
command reconciles attempts still marked active against the backend and the result files.

The journal is a rollback journal kept between transactions (PERSIST, synchronous FULL), not WAL: a WAL
reader maps a `-shm` index file that it must first extend, and on a full filesystem with 1 KiB blocks that
mapping cannot be backed and the process dies of SIGBUS. Reading a PERSIST ledger writes nothing at all, and
a write the disk refuses is an error SQLite reports (StorageError), never a signal.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from studyctl.attempt.paths import MAX_ATTEMPT
from studyctl.attempt.records import Handle, Update
from studyctl.definition.checkpoint.points import Point
from studyctl.errors import StorageError, UserError
from studyctl.states import ACTIVE_STATES, EXCLUDED, State
from studyctl.study import ledger_schema
from studyctl.study.ledger_schema import LedgerDamaged


@dataclass(frozen=True)
class AttemptRow:
    point_id: str
    attempt: int
    backend: str
    state: State
    job_id: str | None
    array_index: int | None
    pid: int | None
    failure_class: str | None
    reason: str | None
    exit_code: int | None
    node_list: str | None
    submitted_at: float
    started_at: float | None
    ended_at: float | None
    result_path: str | None

    @property
    def handle(self) -> Handle:
        return Handle(job_id=self.job_id, array_index=self.array_index, pid=self.pid)


@dataclass(frozen=True)
class PointRow:
    point_id: str
    run_order: int
    config: dict[str, Any]  # as stored (`Point.canonical()`); read it through `point`
    excluded: bool
    exclude_reason: str | None
    in_sweep: bool
    latest: AttemptRow | None  # None: never attempted

    @property
    def state(self) -> State:
        return self.latest.state if self.latest else State.PLANNED

    @property
    def attempts(self) -> int:
        return self.latest.attempt if self.latest else 0

    @cached_property
    def point(self) -> Point:
        """The stored configuration as the point model, parsed once, on first use (a status table shows 50 rows)."""
        try:
            return Point.model_validate(self.config)
        except ValidationError as exc:
            raise UserError(f"point {self.point_id}: the ledger's configuration of it is not a point "
                            f"({exc.errors(include_url=False)[0]['msg']}); was the ledger edited by hand?", 1) from None


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Read-only, never creating or changing a file. A ledger an older studyctl left in WAL mode is opened as
    immutable where its WAL holds nothing or nobody may write the directory (a read-only mount, a colleague's
    results): SQLite would otherwise make (and map) the WAL index it needs to read. A rollback-journal ledger
    is never read as immutable: that would read past a journal a killed writer left, i.e. half a change."""
    uri = path.absolute().as_uri()
    immutable = f"{uri}?mode=ro&immutable=1"
    wal = _wal_left(path)
    if wal is not None and wal == 0:
        return sqlite3.connect(immutable, uri=True, timeout=30, isolation_level=None)
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30, isolation_level=None)
    db.execute("PRAGMA busy_timeout=30000")
    if wal is None or os.access(path.parent, os.W_OK):
        return db
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        db.close()
    return sqlite3.connect(immutable, uri=True, timeout=30, isolation_level=None)


def _wal_left(path: Path) -> int | None:
    """For a WAL-mode file (header bytes 18-19 are 2, as older versions wrote it): the bytes in its WAL (0: the
    file alone is the whole ledger). None for a rollback-journal file."""
    try:
        with path.open("rb") as fh:
            header = fh.read(20)
        if header[18:20] != b"\x02\x02":
            return None
        wal = path.with_name(path.name + "-wal")
        return wal.stat().st_size if wal.exists() else 0
    except OSError:
        return None


def _connect_for_writes(path: Path) -> sqlite3.Connection:
    """PERSIST journal, FULL sync. An older WAL ledger is converted under an exclusive lock, which keeps SQLite's
    WAL index in heap memory (no `-shm` to map) for that one step."""
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        db.execute("PRAGMA busy_timeout=30000")
        db.execute("PRAGMA locking_mode=EXCLUSIVE")
        db.execute("PRAGMA journal_mode=PERSIST")
        db.execute("PRAGMA locking_mode=NORMAL")
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # lets go of the exclusive lock
        db.execute("PRAGMA synchronous=FULL")
    except BaseException:
        db.close()
        raise
    return db


_ATTEMPT_COLS = ("point_id, attempt, backend, state, job_id, array_index, pid, failure_class, reason, "
                 "exit_code, node_list, submitted_at, started_at, ended_at, result_path")


def _attempt(row: Sequence[Any]) -> AttemptRow:
    values = list(row)
    try:
        values[3] = State(values[3])
    except ValueError:
        raise LedgerDamaged(f"attempt {values[1]} of point {values[0]}: state {values[3]!r} is not a state") from None
    return AttemptRow(*values)


def _config(point_id: str, text: str) -> dict[str, Any]:
    try:
        config = json.loads(text)
    except (TypeError, ValueError):
        config = None
    if not isinstance(config, dict):
        raise LedgerDamaged(f"point {point_id}: its config is not a JSON object")
    return config


class Ledger:
    """One study's ledger file. Connections are short-lived per command; writes are transactions."""

    def __init__(self, path: Path, readonly: bool = False) -> None:
        """`readonly`: for commands that only read (collect): never creates, migrates or writes the file."""
        self.path = path
        if path.exists() and not path.is_file():  # a FIFO would block the open forever, a directory cannot be one
            raise UserError(f"{path}: not a regular file, so not a ledger; move it away and 'studyctl sweep status' "
                            "rebuilds the ledger from the attempt directories", 1)
        if readonly:
            self._db = _connect_read_only(path)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = _connect_for_writes(path)
        try:
            if ledger_schema.is_empty(self._db):
                with self.transaction() as db:
                    ledger_schema.create(db)
        except BaseException:
            self._db.close()
            raise

    def check(self) -> None:
        """LedgerDamaged unless every table, column and row is one studyctl could have written."""
        ledger_schema.check_schema(self._db)
        ledger_schema.check_rows(self._db)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All or nothing. A write the disk refuses (full, read-only) or a ledger held too long by another
        command is one line (StorageError), never a half-made change."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._cannot_write(exc) from None
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):  # a full disk, a lock held too long, a constraint of an odd file
                raise self._cannot_write(exc) from None
            raise

    def _cannot_write(self, exc: sqlite3.Error) -> StorageError:
        return StorageError(f"{self.path}: cannot be updated ({exc}); results already written are kept, and the "
                            "next command brings the ledger up to date from them")

    # ---- meta
    def set_meta(self, **values: str) -> None:
        with self.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", values.items())

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    # ---- points
    def sync_points(self, points: Iterable[tuple[str, int, dict[str, Any], bool, str | None]]) -> int:
        """Insert new points, refresh order/exclusion of known ones, mark the rest out of the sweep; how many were
        new. Only what changed is written: a rerun of the same sweep writes nothing (status, resubmit stay fast)."""
        now = time.time()
        rows = list(points)
        with self.transaction() as db:
            known = {pid: (order, bool(exc), reason, bool(ins)) for pid, order, exc, reason, ins in
                     db.execute("SELECT point_id, run_order, excluded, exclude_reason, in_sweep FROM points")}
            wanted = {r[0] for r in rows}
            db.executemany("UPDATE points SET in_sweep = 0 WHERE point_id = ?",
                           [(pid,) for pid, was in known.items() if was[3] and pid not in wanted])
            db.executemany(
                "INSERT INTO points(point_id, run_order, config, excluded, exclude_reason, in_sweep, added_at) "
                "VALUES (?, ?, ?, ?, ?, 1, ?) ON CONFLICT(point_id) DO UPDATE SET run_order = excluded.run_order, "
                "excluded = excluded.excluded, exclude_reason = excluded.exclude_reason, in_sweep = 1",
                [(pid, order, json.dumps(cfg, sort_keys=True), int(exc), reason, now)
                 for pid, order, cfg, exc, reason in rows if known.get(pid) != (order, bool(exc), reason, True)],
            )
        return sum(1 for r in rows if r[0] not in known)

    def points(self, only_in_sweep: bool = True) -> list[PointRow]:
        latest = {a.point_id: a for a in self.latest_attempts()}
        query = "SELECT point_id, run_order, config, excluded, exclude_reason, in_sweep FROM points"
        if only_in_sweep:
            query += " WHERE in_sweep = 1"
        return [
            PointRow(pid, order, _config(pid, cfg), bool(exc), reason, bool(ins), latest.get(pid))
            for pid, order, cfg, exc, reason, ins in self._db.execute(query + " ORDER BY run_order")
        ]

    # ---- attempts
    def latest_attempts(self) -> list[AttemptRow]:
        cols = ", ".join(f"a.{c.strip()}" for c in _ATTEMPT_COLS.split(","))
        rows = self._db.execute(
            f"SELECT {cols} FROM attempts a JOIN (SELECT point_id, MAX(attempt) AS last FROM attempts "
            "GROUP BY point_id) m ON a.point_id = m.point_id AND a.attempt = m.last"
        )
        return [_attempt(r) for r in rows]

    def state_counts(self) -> dict[str, int]:
        """Points per state (EXCLUDED for excluded points), computed in SQL for large studies."""
        rows = self._db.execute(
            f"SELECT CASE WHEN p.excluded THEN '{EXCLUDED}' ELSE COALESCE(a.state, 'PLANNED') END, COUNT(*) "
            "FROM points p LEFT JOIN (SELECT point_id, MAX(attempt) AS last FROM attempts GROUP BY point_id) m "
            "ON m.point_id = p.point_id LEFT JOIN attempts a ON a.point_id = m.point_id AND a.attempt = m.last "
            "WHERE p.in_sweep = 1 GROUP BY 1"
        )
        return dict(rows.fetchall())

    def attempts(self, point_id: str | None = None) -> list[AttemptRow]:
        if point_id is None:
            rows = self._db.execute(f"SELECT {_ATTEMPT_COLS} FROM attempts ORDER BY point_id, attempt")
        else:
            rows = self._db.execute(f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE point_id = ? ORDER BY attempt",
                                    (point_id,))
        return [_attempt(r) for r in rows]

    def attempts_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0])

    def attempt_keys(self) -> set[tuple[str, int]]:
        return set(self._db.execute("SELECT point_id, attempt FROM attempts"))

    def attempts_in(self, state: State) -> list[AttemptRow]:
        """Every attempt (latest or not) now in `state`."""
        rows = self._db.execute(f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE state = ?", (state.value,))
        return [_attempt(r) for r in rows]

    def active_attempts(self, queued: bool = False) -> list[AttemptRow]:
        """Attempts queued or running; `queued` adds those still PLANNED in a runner's own queue."""
        states = [s.value for s in ACTIVE_STATES] + ([State.PLANNED.value] if queued else [])
        marks = ",".join("?" * len(states))
        rows = self._db.execute(f"SELECT {_ATTEMPT_COLS} FROM attempts WHERE state IN ({marks})", states)
        return [_attempt(r) for r in rows]

    def new_attempts(self, items: Sequence[tuple[str, str]], state: State = State.SUBMITTED,
                     on_disk: Mapping[str, int] | None = None) -> dict[str, int]:
        """Open an attempt per (point_id, backend); returns point_id → attempt number.

        An attempt still PLANNED (queued locally, never started) is reused: attempts count starts.
        `on_disk`: the highest attempt number with a directory, per point: a new attempt is numbered above
        it even if the ledger forgot it, so no attempt directory is ever written twice.
        """
        now = time.time()
        out: dict[str, int] = {}
        with self.transaction() as db:
            for point_id, backend in items:
                last, last_state = db.execute(
                    "SELECT attempt, state FROM attempts WHERE point_id = ? ORDER BY attempt DESC LIMIT 1",
                    (point_id,)).fetchone() or (0, None)
                if (on_disk or {}).get(point_id, 0) > last:
                    last, last_state = (on_disk or {})[point_id], None
                if last_state == State.PLANNED.value:
                    db.execute("UPDATE attempts SET backend = ?, state = ?, submitted_at = ?, updated_at = ? "
                               "WHERE point_id = ? AND attempt = ?", (backend, state.value, now, now, point_id, last))
                    out[point_id] = last
                    continue
                if last >= MAX_ATTEMPT:
                    raise UserError(f"point {point_id}: attempt {last} exists, the last number an attempt may have; "
                                    "move its attempt directories away to run it again", 1)
                out[point_id] = last + 1
                db.execute("INSERT INTO attempts(point_id, attempt, backend, state, submitted_at, updated_at) "
                           "VALUES (?, ?, ?, ?, ?, ?)", (point_id, last + 1, backend, state.value, now, now))
                db.execute("INSERT INTO events(point_id, attempt, state, at) VALUES (?, ?, ?, ?)",
                           (point_id, last + 1, state.value, now))
        return out

    def restore_attempts(self, rows: Sequence[tuple[dict[str, Any], str, Update, float, str | None]]) -> int:
        """Attempts found on disk that the ledger does not know: (point config, backend, how it ended, when,
        result path).

        Points are added out of the sweep until the next sync; known attempts are left alone. Returns how many
        attempts were added.
        """
        now = time.time()
        added = 0
        with self.transaction() as db:
            for config, backend, u, at, result_path in rows:
                db.execute("INSERT OR IGNORE INTO points(point_id, run_order, config, excluded, in_sweep, added_at) "
                           "VALUES (?, 0, ?, 0, 0, ?)", (u.point_id, json.dumps(config, sort_keys=True), now))
                cur = db.execute(
                    "INSERT OR IGNORE INTO attempts(point_id, attempt, backend, state, failure_class, reason, "
                    "node_list, submitted_at, ended_at, result_path, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (u.point_id, u.attempt, backend, u.state.value, u.failure_class.value if u.failure_class else None,
                     u.reason, u.node_list, at, u.ended_at, result_path, now))
                if cur.rowcount:
                    added += 1
                    db.execute("INSERT INTO events(point_id, attempt, state, at, detail) VALUES (?, ?, ?, ?, ?)",
                               (u.point_id, u.attempt, u.state.value, now, "restored from the attempt directory"))
        return added

    def record_handles(self, items: Sequence[tuple[str, int, Handle]]) -> None:
        now = time.time()
        with self.transaction() as db:
            db.executemany(
                "UPDATE attempts SET job_id = ?, array_index = ?, pid = ?, updated_at = ? "
                "WHERE point_id = ? AND attempt = ?",
                [(h.job_id, h.array_index, h.pid, now, pid, att) for pid, att, h in items],
            )

    def record_updates(self, updates: Sequence[Update], result_paths: dict[tuple[str, int], str] | None = None) -> None:
        """Apply state changes. A final state is overwritten only by COMPLETED (a result file is the truth)."""
        if not updates:
            return
        now = time.time()
        result_paths = result_paths or {}
        finals = [s.value for s in State if s not in ACTIVE_STATES and s is not State.PLANNED]
        marks = ",".join("?" * len(finals))
        with self.transaction() as db:
            for u in updates:
                cur = db.execute(
                    f"UPDATE attempts SET state = ?, failure_class = COALESCE(?, failure_class), "
                    f"reason = COALESCE(?, reason), exit_code = COALESCE(?, exit_code), "
                    f"node_list = COALESCE(?, node_list), started_at = COALESCE(started_at, ?), "
                    f"ended_at = COALESCE(?, ended_at), result_path = COALESCE(?, result_path), updated_at = ? "
                    f"WHERE point_id = ? AND attempt = ? AND state != ? AND (state NOT IN ({marks}) OR ? = ?)",
                    (u.state.value, u.failure_class.value if u.failure_class else None, u.reason, u.exit_code,
                     u.node_list, u.started_at, u.ended_at, result_paths.get((u.point_id, u.attempt)), now,
                     u.point_id, u.attempt, u.state.value, *finals, u.state.value, State.COMPLETED.value),
                )
                if cur.rowcount:
                    db.execute("INSERT INTO events(point_id, attempt, state, at, detail) VALUES (?, ?, ?, ?, ?)",
                               (u.point_id, u.attempt, u.state.value, now, u.reason))

    def events(self, point_id: str) -> list[tuple[int, str, float, str | None]]:
        return list(self._db.execute("SELECT attempt, state, at, detail FROM events WHERE point_id = ? ORDER BY id",
                                     (point_id,)))
