"""Ledger writes for a backend's callbacks, with result paths, cleanup after kills and a progress hook."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Handle, Launch, Update
from studyctl.spec.points import Point
from studyctl.spec.sweep import SweepFile
from studyctl.states import State
from studyctl.study.ledger import Ledger

ProgressHook = Callable[[Update], None]
# The worker was killed (or never heard from): it could not remove its checkpoint files itself.
KILLED = frozenset({State.TIMEOUT, State.CANCELLED, State.LOST, State.PREEMPTED, State.NODE_FAIL,
                    State.OUT_OF_MEMORY})


def cleanup_point_data(paths: StudyPaths, sweep: SweepFile | None, update: Update, point: Point | None) -> None:
    """After a kill (timeout, cancel, lost) remove the point's data directory on its filesystem, only that."""
    if sweep is None or point is None or update.state not in KILLED:
        return
    fs = sweep.filesystems.get(point.filesystem)
    if fs is None:
        return
    target = Path(fs.path) / paths.name / update.point_id
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, ignore_errors=True)


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
            cleanup_point_data(self.paths, self.sweep, u, self.points.get(u.point_id))
        self.ledger.record_updates(updates, results)
        if self.progress:
            for u in updates:
                self.progress(u)
