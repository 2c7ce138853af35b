"""Removing what ended attempts wrote: as soon as their ranks are gone, else by a later command.

Every attempt gets a cleanup marker before it can write (`StudyPaths.cleanup`); it goes only once every
place the point writes is clean, so whichever way an attempt ended (Ctrl-C, SIGTERM, TIMEOUT, a killed
rank, `cancel`) and whichever command saw it end, the next command that reconciles the study finishes it.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from functools import partial
from typing import Any

from studyctl.attempt.data import Cleanup, derive_places, remove_attempt_data, task_disagrees
from studyctl.attempt.paths import StudyPaths
from studyctl.backends.base import Backend
from studyctl.definition.inputs.filesystems import ObjectStoreSpec
from studyctl.definition.planning.sweep import SweepFile
from studyctl.states import FINAL_STATES, State
from studyctl.study.ledger import AttemptRow, Ledger

BackendOf = Callable[[str], Backend | None]
POLL_S = 0.1
CLEANUP_WAIT_S = 15.0  # how long a command that stopped attempts waits for their ranks to go, then leaves it


def mark(paths: StudyPaths, keys: Iterable[tuple[str, int]]) -> None:
    """Cleanup markers for attempts about to start (or found ended without one: a study from before them)."""
    keys = list(keys)
    if not keys:
        return
    with contextlib.suppress(OSError):  # a study that cannot be written cannot run either: its command says why
        paths.cleanup.mkdir(exist_ok=True)
        for point_id, attempt in keys:
            paths.cleanup_marker(point_id, attempt).touch()


def finish_cleanups(paths: StudyPaths, ledger: Ledger, sweep: SweepFile | None, backend_of: BackendOf,
                    only: Collection[tuple[str, int]] | None = None, wait_s: float = 0.0) -> list[str]:
    """Clean every marked attempt the ledger records as ended (`only`: just these), waiting up to `wait_s`
    for ranks still running; returns a note per attempt whose data was refused (not provably the study's)."""
    pending = [k for k in paths.pending_cleanups() if only is None or k in only]
    if not pending or sweep is None:  # no sweep: its filesystems are unknown, so nothing can be derived yet
        return []
    rows = _ended_rows(ledger, pending)
    if not rows:
        return []
    ids = {point_id for point_id, _ in rows}
    configs = {p.point_id: p.config for p in ledger.points(only_in_sweep=False) if p.point_id in ids}
    filesystems = {name: fs.path for name, fs in sweep.filesystems.items()}
    stores = {name: fs.object_store for name, fs in sweep.filesystems.items() if fs.object_store is not None}
    by_backend: dict[str, list[AttemptRow]] = {}
    for row in rows.values():
        by_backend.setdefault(row.backend, []).append(row)
    deadline = time.monotonic() + wait_s
    notes: list[str] = []
    left: Counter[str] = Counter()  # why an object store's data was left → attempts
    for name, group in by_backend.items():
        backend = backend_of(name)
        if backend is not None:
            clean = partial(_clean, paths, configs=configs, filesystems=filesystems, backend=backend, stores=stores,
                            left=left)
            notes += _clean_when_gone(paths, backend, group, clean, deadline)
    notes += [f"objects of {n} ended attempt{'s' * (n != 1)} not removed yet (clean-up marked in {paths.cleanup}; "
              f"a later command retries): {why}" for why, n in left.items()]
    return notes


def _clean_when_gone(paths: StudyPaths, backend: Backend, rows: list[AttemptRow],
                     clean: Callable[[AttemptRow], Cleanup | str], deadline: float) -> list[str]:
    """Clean each row once its ranks are gone, trying again until `deadline` while they run or the point's claim
    is still held. The claim is the proof that no rank writes: a rank leaves the process table's view (its
    command line goes with its memory) before its exit closes its files, the claim's lock among them."""
    notes: list[str] = []
    while True:
        live = _live(paths, backend, rows)
        again = []
        for row in rows:
            outcome = Cleanup.HELD if (row.point_id, row.attempt) in live else clean(row)
            if isinstance(outcome, str):
                notes.append(outcome)
            elif outcome is Cleanup.HELD:
                again.append(row)
        if not again or time.monotonic() >= deadline:
            return notes
        rows = again
        time.sleep(POLL_S)


def _clean(paths: StudyPaths, row: AttemptRow, configs: dict[str, dict[str, Any]], filesystems: dict[str, str],
           backend: Backend, stores: dict[str, ObjectStoreSpec], left: Counter[str]) -> Cleanup | str:
    """Remove one ended attempt's data if it is provably the study's (else a note, and it is never tried
    again); its marker goes once every place is clean (why an object store's was not: counted in `left`)."""
    key = (row.point_id, row.attempt)
    derived = derive_places(paths, row.point_id, configs.get(row.point_id), filesystems, stores)
    refused = derived if isinstance(derived, str) else task_disagrees(paths.attempt(*key), derived[1])
    if refused is not None:
        _unmark(paths, key)
        return f"attempt {row.attempt} of point {row.point_id}: its data is not removed: {refused}"
    assert not isinstance(derived, str)
    point, places = derived
    remover = partial(backend.remove_node_local, point=point, node_list=row.node_list,
                      completed=row.state is State.COMPLETED, job_id=row.job_id)
    problems: list[str] = []
    outcome = remove_attempt_data(point, places, remover, problems)
    left.update(problems)
    if outcome is Cleanup.DONE:
        _unmark(paths, key)
    return outcome


def _ended_rows(ledger: Ledger, keys: Collection[tuple[str, int]]) -> dict[tuple[str, int], AttemptRow]:
    """The marked attempts the ledger records as ended (one query: status of a large study stays quick)."""
    wanted = set(keys)
    return {(a.point_id, a.attempt): a for a in ledger.attempts()
            if (a.point_id, a.attempt) in wanted and a.state in FINAL_STATES}


def _live(paths: StudyPaths, backend: Backend, rows: list[AttemptRow]) -> set[tuple[str, int]]:
    """The rows some of whose processes still run, as the backend sees them."""
    task = {paths.attempt(r.point_id, r.attempt).task: (r.point_id, r.attempt) for r in rows}
    return {task[t] for t in backend.still_running({paths.attempt(r.point_id, r.attempt).task: r.handle
                                                      for r in rows})}


def _unmark(paths: StudyPaths, key: tuple[str, int]) -> None:
    with contextlib.suppress(OSError):
        paths.cleanup_marker(*key).unlink()
