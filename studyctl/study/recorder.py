"""Ledger writes for a backend's callbacks, with result paths, cleanup after kills and a progress hook."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from studyctl.attempt.data import read_task, remove_unclaimed_data
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Handle, Launch, Update
from studyctl.spec.points import Point
from studyctl.spec.sweep import SweepFile
from studyctl.states import ACTIVE_STATES, FailureClass, State
from studyctl.study.ledger import Ledger

ProgressHook = Callable[[Update], None]


def cleanup_point_data(paths: StudyPaths, update: Update) -> None:
    """A point that ended without completing (killed, crashed, lost) may have left checkpoint files: remove
    them, unless the point keeps them or a live run still holds their claim (see attempt/data.py)."""
    if update.state is State.COMPLETED or update.state in ACTIVE_STATES or update.failure_class is FailureClass.BUSY:
        return
    task = read_task(paths.attempt(update.point_id, update.attempt))
    if task is not None:
        remove_unclaimed_data(task)


class Recorder:
    """What a backend's `record_handle` / `record_update` do: write the ledger, clean up, report progress."""

    def __init__(self, paths: StudyPaths, ledger: Ledger, sweep: SweepFile | None,
                 progress: ProgressHook | None = None) -> None:
        self.paths, self.ledger, self.sweep, self.progress = paths, ledger, sweep, progress
        self.points: dict[str, Point] = {}  # point_id → point, for cleanup

    def know(self, launches: Sequence[Launch]) -> None:
        self.points.update((la.point_id, la.point) for la in launches)

    def handle(self, launch: Launch, handle: Handle) -> None:
        self.ledger.record_handles([(launch.point_id, launch.attempt, handle)])

    def handles(self, found: Sequence[tuple[Launch, Handle]]) -> None:
        self.ledger.record_handles([(la.point_id, la.attempt, h) for la, h in found])

    def update(self, update: Update) -> None:
        self.updates([update])

    def updates(self, updates: Sequence[Update]) -> None:
        if not updates:
            return
        results = {}
        for u in updates:
            if u.state is State.COMPLETED:
                results[(u.point_id, u.attempt)] = str(self.paths.attempt(u.point_id, u.attempt).result)
            cleanup_point_data(self.paths, u)
        self.ledger.record_updates(updates, results)
        if self.progress:
            for u in updates:
                self.progress(u)
