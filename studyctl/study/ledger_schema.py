"""The ledger's tables, and the check that a file really holds them before anything reads or writes it.

A ledger is a file in a results directory: anyone may have edited it (an unknown state, a column dropped or
added, a config that is not JSON, a trigger that aborts writes). Each of those is found here, named in one line
(`LedgerDamaged`), and the ledger is rebuilt from the attempt directories (`study.repair`) or, for commands
that only read, refused in that line. The expected shape is derived from SCHEMA itself (an in-memory copy),
the allowed values from `State` and `Point`, so nothing here is a second list to keep in step.
"""

from __future__ import annotations

import sqlite3
from functools import cache
from typing import Any, Literal, get_args, get_origin

from studyctl.attempt.paths import MAX_ATTEMPT
from studyctl.definition.checkpoint.points import POINT_OMIT_AT_DEFAULT, Point
from studyctl.states import State

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    point_id TEXT PRIMARY KEY,
    run_order INTEGER NOT NULL,
    config TEXT NOT NULL,
    excluded INTEGER NOT NULL DEFAULT 0,
    exclude_reason TEXT,
    in_sweep INTEGER NOT NULL DEFAULT 1,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (
    point_id TEXT NOT NULL REFERENCES points(point_id),
    attempt INTEGER NOT NULL,
    backend TEXT NOT NULL,
    state TEXT NOT NULL,
    job_id TEXT,
    array_index INTEGER,
    pid INTEGER,
    failure_class TEXT,
    reason TEXT,
    exit_code INTEGER,
    node_list TEXT,
    submitted_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    result_path TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (point_id, attempt)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    point_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    at REAL NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS attempts_state ON attempts(state);
"""

# What a value of each declared column type may be stored as (SQLite keeps any type in any column).
_STORED_AS = {"TEXT": ("text",), "INTEGER": ("integer",), "REAL": ("real", "integer")}
# JSON type of each field of a point's config, from the field's Python type (model/checkpoint: objects).
_JSON_TYPE = {str: "text", int: "integer", float: "real"}


class LedgerDamaged(sqlite3.DatabaseError):
    """The file is a database, but not a ledger studyctl can trust: what is wrong, in one line."""


def create(db: sqlite3.Connection) -> None:
    for stmt in SCHEMA.strip().split(";"):
        if stmt.strip():
            db.execute(stmt)


@cache
def _expected() -> tuple[frozenset[tuple[str, str]], dict[str, list[tuple[str, str, int, int]]]]:
    """The objects (type, name) and each table's columns (name, type, not null, pk) SCHEMA makes."""
    db = sqlite3.connect(":memory:")
    create(db)
    objects = frozenset(db.execute("SELECT type, name FROM sqlite_master"))
    tables = {name: _columns(db, name) for kind, name in objects if kind == "table" and name != "sqlite_sequence"}
    db.close()
    return objects, tables


def _columns(db: sqlite3.Connection, table: str) -> list[tuple[str, str, int, int]]:
    return [(name, kind.upper(), notnull, pk) for _, name, kind, notnull, _, pk in
            db.execute(f"PRAGMA table_info({table})")]


def is_empty(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0


def check_schema(db: sqlite3.Connection) -> None:
    """LedgerDamaged unless the file has exactly SCHEMA's tables, columns and index: no view, no trigger."""
    objects, tables = _expected()
    found = set(db.execute("SELECT type, name FROM sqlite_master"))
    for kind, name in sorted(found - objects):
        raise LedgerDamaged(f"not a studyctl ledger: it has a {kind} {name!r} studyctl never makes")
    for kind, name in sorted(objects - found):
        raise LedgerDamaged(f"not a studyctl ledger: {kind} {name!r} is missing")
    for table, columns in tables.items():
        have = _columns(db, table)
        if have != columns:
            theirs = ", ".join(f"{n} {k}" for n, k, _, _ in have)
            raise LedgerDamaged(f"not a studyctl ledger: table {table} has columns ({theirs}), studyctl's has "
                                f"({', '.join(f'{n} {k}' for n, k, _, _ in columns)})")


def _column_rules(table: str) -> list[tuple[str, str]]:
    """(column, SQL that is true for a value studyctl could have written) for each column of `table`."""
    rules = []
    for name, kind, notnull, _ in _expected()[1][table]:
        stored = ", ".join(f"'{t}'" for t in _STORED_AS[kind])
        rules.append((name, f"typeof({name}) IN ({stored})" + ("" if notnull else f" OR {name} IS NULL")))
    if table == "attempts":
        states = ", ".join(f"'{s.value}'" for s in State)
        rules += [("state", f"state IN ({states})"), ("attempt", f"attempt BETWEEN 1 AND {MAX_ATTEMPT}")]
    if table == "points":
        rules.append(("config", "CASE WHEN json_valid(config) THEN json_type(config) = 'object' ELSE 0 END"))
        rules += [("config", f"json_type(config, '$.{field}') = '{_json_type(field)}'"
                   + (f" OR json_type(config, '$.{field}') IS NULL" if field in POINT_OMIT_AT_DEFAULT else ""))
                  for field in Point.model_fields]
        rules.append(("config", "json_type(config, '$.model.name') = 'text'"))
    return rules


def _json_type(field: str) -> str:
    kind: Any = Point.model_fields[field].annotation
    if get_origin(kind) is Literal:
        kind = type(get_args(kind)[0])
    return _JSON_TYPE.get(kind, "object")


# Tables whose rows studyctl reads back (events is a history it only appends to: its shape is checked, not
# its rows, which would cost a scan of the largest table on every command).
READ_BACK = ("attempts", "meta", "points")


def check_rows(db: sqlite3.Connection) -> None:
    """LedgerDamaged naming the first row with a value studyctl never writes (one scan per table read back)."""
    for table in READ_BACK:
        rules = _column_rules(table)
        first_bad = " ".join(f"WHEN NOT COALESCE(({rule}), 0) THEN '{column}'" for column, rule in rules)
        row = db.execute(f"SELECT * FROM (SELECT rowid, CASE {first_bad} END AS bad FROM {table}) "
                         "WHERE bad IS NOT NULL LIMIT 1").fetchone()
        if row is not None:
            value = db.execute(f"SELECT {row[1]} FROM {table} WHERE rowid = ?", (row[0],)).fetchone()[0]
            shown = repr(value if not isinstance(value, str | bytes) or len(value) < 80 else value[:80])
            raise LedgerDamaged(f"table {table}, row {row[0]}: {row[1]} {shown} is not a value studyctl writes")
