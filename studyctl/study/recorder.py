"""Ledger writes for a backend's callbacks, with result paths, cleanup of ended attempts and a progress hook."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Handle, Launch, Update
from studyctl.backends.base import Backend
from studyctl.definition.planning.sweep import SweepFile
from studyctl.errors import StorageError
from studyctl.states import FINAL_STATES, State
from studyctl.study.cleanup import finish_cleanups, mark
from studyctl.study.ledger import Ledger

ProgressHook = Callable[[Update], None]


class Recorder:
    """What a backend's `record_handle` / `record_update` do: write the ledger, clean up, report progress.

    `defer`: an end (a final state) or a handle the disk refuses to record (StorageError: full) is kept and
    retried with the next write, so a runner keeps supervising (and timing out) what runs; `flush()` at the end
    raises if it still fails. Without it, or for a start, the error is raised at once.

    `backend`: an attempt it reports ended has its data removed at once if its ranks are gone (else by a
    later pass: `study.cleanup`)."""

    def __init__(self, paths: StudyPaths, ledger: Ledger, sweep: SweepFile | None,
                 progress: ProgressHook | None = None, defer: bool = False, backend: Backend | None = None) -> None:
        self.paths, self.ledger, self.sweep, self.progress = paths, ledger, sweep, progress
        self.backend = backend
        self.notes: list[str] = []  # ended attempts whose data was refused (not provably the study's)
        self.defer = defer
        self._handles: list[tuple[str, int, Handle]] = []  # not yet written (deferred)
        self._updates: list[Update] = []
        self._failure: StorageError | None = None

    def handle(self, launch: Launch, handle: Handle) -> None:
        self.handles([(launch, handle)])

    def handles(self, found: Sequence[tuple[Launch, Handle]]) -> None:
        self._handles += [(la.point_id, la.attempt, h) for la, h in found]
        self._write()

    def update(self, update: Update) -> None:
        self.updates([update])

    def updates(self, updates: Sequence[Update]) -> None:
        if not updates:
            return
        ended = [(u.point_id, u.attempt) for u in updates if u.state in FINAL_STATES]
        mark(self.paths, ended)  # an attempt from before markers: its data is looked for all the same
        self._updates += updates
        self._write()
        if ended and self.backend is not None:
            backend = self.backend
            self.notes += finish_cleanups(self.paths, self.ledger, self.sweep,
                                          lambda name: backend if name == backend.name else None, only=set(ended))
        if self.progress:
            for u in updates:
                self.progress(u)

    def flush(self) -> None:
        """Write what was deferred; the StorageError if the ledger still cannot be written."""
        if self._handles or self._updates:
            self._write()
        if self._failure is not None:
            raise self._failure

    def _write(self) -> None:
        results = {(u.point_id, u.attempt): str(self.paths.attempt(u.point_id, u.attempt).result)
                   for u in self._updates if u.state is State.COMPLETED}
        try:
            if self._handles:
                self.ledger.record_handles(self._handles)
                self._handles = []
            if self._updates:
                self.ledger.record_updates(self._updates, results)
                self._updates = []
            self._failure = None
        except StorageError as exc:
            # A start (RUNNING, SUBMITTED) is never deferred: it must be on record before the process can do work.
            if not self.defer or any(u.state not in FINAL_STATES for u in self._updates):
                raise
            self._failure = exc
