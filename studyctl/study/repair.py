"""A missing, emptied or damaged ledger never costs results: attempt directories are the evidence.

Every command that writes the ledger opens it here. A damaged file is moved aside (kept, never deleted)
and the ledger is rebuilt; attempts on disk the ledger does not know are restored from their files
(result.json: COMPLETED, error.json: FAILED, neither: SUBMITTED, until reconciling finds its process or
job or calls it LOST), each with a message for the user. A ledger that is busy or cannot be opened is
not damaged: that is one line and nothing moved.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager

from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Update
from studyctl.backends import base
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import StorageError, UserError
from studyctl.states import State
from studyctl.study.ledger import Ledger
from studyctl.study.store import planned_to_run, sync_points


@contextmanager
def open_ledger(paths: StudyPaths, backend: str, notes: list[str]) -> Iterator[Ledger]:
    """The study's ledger, rebuilt from the attempt directories where it lost them; `notes` say what was done.

    `backend`: recorded for restored attempts no backend's own records claim.
    """
    try:
        ledger = _open_checked(paths)
    except sqlite3.OperationalError as exc:  # locked, unreadable, a full disk: not damage
        raise StorageError(f"{paths.ledger}: cannot be opened ({exc})") from None
    except sqlite3.DatabaseError as exc:  # not a database, malformed, not a ledger (LedgerDamaged)
        aside = paths.ledger.with_name(f"{paths.ledger.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
        os.replace(paths.ledger, aside)
        for side in paths.ledger_side_files:  # a journal left here would be played into the new ledger
            if side.exists():
                os.replace(side, aside.with_name(aside.name + side.name.removeprefix(paths.ledger.name)))
        notes.append(f"{paths.ledger}: damaged ({exc}); kept as {aside.name}, rebuilt from the attempt directories")
        ledger = Ledger(paths.ledger)
    try:
        restored = restore_from_disk(paths, ledger, backend)
        if restored:
            notes.append(f"{paths.ledger}: {restored} attempts on disk were missing from the ledger; restored from "
                         "their directories")
        if notes:
            _resync(paths, ledger, backend)
        yield ledger
    finally:
        ledger.close()


def _resync(paths: StudyPaths, ledger: Ledger, backend: str) -> None:
    """The recorded sweep's points back in the rebuilt ledger (restored attempts come back out of the sweep), so
    every command sees the study as before, whichever command did the repair."""
    try:
        planned = planned_to_run(load_sweep(paths.sweep_copy), ledger.meta("backend") or backend, [])
    except UserError:
        return  # no readable copy: the next submit records the sweep again
    sync_points(ledger, planned)


def _open_checked(paths: StudyPaths) -> Ledger:
    ledger = Ledger(paths.ledger)
    try:
        ledger.check()
    except sqlite3.DatabaseError:
        ledger.close()
        raise
    return ledger


def restore_from_disk(paths: StudyPaths, ledger: Ledger, backend: str) -> int:
    """Record every attempt directory the ledger does not know; returns how many."""
    known = ledger.attempt_keys()
    owners: dict[str, str] | None = None
    rows = []
    for point_id in paths.point_ids_on_disk():
        for number in paths.attempts_on_disk(point_id):
            if (point_id, number) in known:
                continue
            files = paths.attempt(point_id, number)
            try:
                task = WorkerTask.model_validate_json(files.task.read_text())
            except (OSError, ValueError):
                continue  # not an attempt studyctl wrote: still never reused, its number stays taken
            at = files.task.stat().st_mtime
            # No outcome yet: it may still run. Restored as SUBMITTED, reconciling finds its process or job
            # (adopted, never started again) or calls it LOST.
            outcome = read_outcome(files, point_id, number) or Update(point_id, number, State.SUBMITTED)
            result = str(files.result) if outcome.state is State.COMPLETED else None
            owners = base.owners(paths) if owners is None else owners
            rows.append((task.point.canonical(), owners.get(str(files.task), backend), outcome, at, result))
    return ledger.restore_attempts(rows) if rows else 0


def read_only_ledger(paths: StudyPaths) -> Ledger:
    """For commands that only read (collect): one clear line if the ledger is missing or damaged.

    A journal a writer killed mid-transaction left behind must be played back before the ledger can be read;
    a read-only open cannot, so where the directory may be written, a writer's open does that first."""
    try:
        return _checked_read_only(paths)
    except sqlite3.OperationalError as exc:
        if not os.access(paths.root, os.W_OK):
            raise _unreadable(paths, exc) from None
    except sqlite3.DatabaseError as exc:
        raise _unreadable(paths, exc) from None
    try:
        Ledger(paths.ledger).close()  # SQLite plays back (undoes) the half-made transaction on this open
        return _checked_read_only(paths)
    except sqlite3.DatabaseError as exc:
        raise _unreadable(paths, exc) from None


def _checked_read_only(paths: StudyPaths) -> Ledger:
    ledger = Ledger(paths.ledger, readonly=True)
    try:
        ledger.check()
    except BaseException:
        ledger.close()
        raise
    return ledger


def _unreadable(paths: StudyPaths, exc: sqlite3.Error) -> UserError:
    return UserError(f"{paths.ledger}: cannot be read ({exc}); 'studyctl sweep status {paths.name}' rebuilds it "
                     "from the attempt directories", 1)
