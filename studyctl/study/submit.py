"""`submit`: plan a sweep, record it, and run what has not run (new, PLANNED and LOST points)."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Active, Update
from studyctl.backends import base
from studyctl.backends.base import Backend
from studyctl.backends.capacity import Judgement, judge
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.planning.expand import PlannedPoint
from studyctl.definition.planning.plan import check_budget, plan_rows, refuse_engines_without_torch, summarize_plan
from studyctl.definition.planning.sweep import SweepFile
from studyctl.errors import StorageError, UserError
from studyctl.fsutil import atomic_write_text
from studyctl.states import ACTIVE_STATES, FailureClass, State
from studyctl.study.cleanup import CLEANUP_WAIT_S, finish_cleanups
from studyctl.study.launches import new_launch
from studyctl.study.ledger import Ledger
from studyctl.study.lock import study_lock
from studyctl.study.reconcile import reconcile
from studyctl.study.recorder import ProgressHook, Recorder
from studyctl.study.repair import open_ledger
from studyctl.study.same_study import check_same_study, checked_same_study
from studyctl.study.signals import stop_on_signals
from studyctl.study.store import load_given_sweep, planned_to_run, sync_points


@dataclass
class SubmitReport:
    study: StudyPaths
    backend: str = ""  # the backend the points were handed to
    # True: the command returned when every point had ended; False: once submitted (follow with status --watch)
    runs_to_completion: bool = False
    points: int = 0
    excluded: int = 0
    new_points: int = 0
    launched: int = 0
    skipped_completed: int = 0
    skipped_active: int = 0
    waiting_for_failed: int = 0  # FAILED/TIMEOUT/...: resubmit reruns them
    node_hours: float = 0.0
    states: Counter[str] = field(default_factory=Counter)
    bytes_to_write: dict[str, int] = field(default_factory=dict)  # per point launched: for a progress view
    # what the command repaired (a lost or damaged ledger), and the points it adds itself that it left out
    notes: list[str] = field(default_factory=list)


def launch_points(paths: StudyPaths, ledger: Ledger, sweep: SweepFile, backend: Backend, todo: Sequence[Point],
                  alive: dict[str, list[Active]], progress: ProgressHook | None, notes: list[str] | None = None) -> int:
    """A new attempt per point in `todo`, handed to `backend` with the attempts of it still alive.

    A point the backend refuses (`Backend.refuse`: it cannot run there at all) is FAILED before anything starts.
    `notes` gets what clean-up of the ended attempts could not do (data refused, or left for a later command)."""
    on_disk = {p.point_id: max(paths.attempts_on_disk(p.point_id), default=0) for p in todo}
    numbers = ledger.new_attempts([(p.point_id, backend.name) for p in todo], backend.initial_state, on_disk)
    launches = [new_launch(paths, sweep, backend, p, numbers[p.point_id]) for p in todo]
    adopted = alive.get(backend.name, [])
    recorder = Recorder(paths, ledger, sweep, progress, defer=True, backend=backend)
    refused = {la.point_id: why for la in launches if (why := backend.refuse(la.point))}
    recorder.updates([Update(la.point_id, la.attempt, State.FAILED, FailureClass.CONFIG, refused[la.point_id],
                             ended_at=time.time()) for la in launches if la.point_id in refused])
    launches = [la for la in launches if la.point_id not in refused]
    started = {(la.point_id, la.attempt) for la in [*launches, *(a.launch for a in adopted)]}
    notes = notes if notes is not None else []
    try:
        with stop_on_signals():
            backend.launch(launches, recorder.handle, recorder.update, adopted=adopted)
    except BaseException:  # interrupted, or a start the ledger could not record: keep what can be kept
        with contextlib.suppress(StorageError):
            recorder.flush()
        with stop_on_signals():  # stopped: its ranks are going; a second signal leaves the rest to a later command
            finish_cleanups(paths, ledger, sweep, {backend.name: backend}.get, only=started, wait_s=CLEANUP_WAIT_S)
        raise
    recorder.flush()  # an end the disk refused to record (full): retried once more, else one line
    with stop_on_signals():  # SIGTERM during the clean-up stops the command too (its markers stay)
        later = finish_cleanups(paths, ledger, sweep, {backend.name: backend}.get, only=started,
                                wait_s=CLEANUP_WAIT_S)
    notes[:] = dict.fromkeys(notes + recorder.notes + later)  # one line per cause, however many passes saw it
    return len(launches)


def _select(report: SubmitReport, planned: Sequence[PlannedPoint], ledger: Ledger) -> list[Point]:
    """Points to run now, counting the others into the report."""
    rows = {p.point_id: p for p in ledger.points()}
    todo: list[Point] = []
    for pp in planned:
        if pp.excluded:
            continue
        state = rows[pp.point.point_id].state
        report.states[state.value] += 1
        if state is State.COMPLETED:
            report.skipped_completed += 1
        elif state in ACTIVE_STATES:
            report.skipped_active += 1
        elif state in (State.PLANNED, State.LOST):
            todo.append(pp.point)
        else:
            report.waiting_for_failed += 1
    return todo


def refuse_up_front(sweep_path: Path, judgement: Judgement, backend: str) -> None:
    """What `plan` would say will not fit, as one line and exit 2 before anything is recorded or started: a
    filesystem path missing or of another kind, a disk too small, a point longer than its time limit. (Memory
    is the backend's to refuse, per point.)"""
    if judgement.refusals:
        more = len(judgement.refusals) - 1
        tail = f" (and {more} more: studyctl plan {sweep_path} --backend {backend} lists them)" if more else ""
        raise UserError(f"{sweep_path}: {judgement.refusals[0]}{tail}; nothing was submitted", 2)


def submit(sweep_path: Path, backend: str = base.DEFAULT, results: Path = Path("results"), dry_run: bool = False,
           budget_node_hours: float | None = None, progress: ProgressHook | None = None,
           on_plan: Callable[[SubmitReport], None] | None = None) -> SubmitReport:
    """Plan the sweep, record it, and run what has not run: new, PLANNED and LOST points.

    Idempotent: completed and queued points are skipped; FAILED/TIMEOUT/... wait for `resubmit`.
    `on_plan` sees the report (counts, backend capabilities) before anything runs.
    """
    base.check_name(backend)
    sweep = refuse_engines_without_torch(load_given_sweep(sweep_path))
    left_out: list[str] = []
    planned = planned_to_run(sweep, backend, left_out)
    summary = summarize_plan(plan_rows(planned, sweep))
    check_budget(summary, budget_node_hours)
    refuse_up_front(sweep_path, judge(sweep, base.backend_class(backend), planned, summary), backend)
    paths = StudyPaths((results / sweep.study).resolve())
    report = SubmitReport(paths, backend, points=len(planned), excluded=summary.excluded,
                          node_hours=summary.node_hours, notes=left_out)
    text = sweep_path.read_text()
    if dry_run:
        check_same_study(paths, planned, text)
        report.launched = summary.runnable
        return report
    runner = base.make(backend, sweep, paths)
    report.runs_to_completion = runner.runs_to_completion
    # the study check under the lock, before the ledger opens: no other submit records its sweep meanwhile
    with study_lock(paths), checked_same_study(paths, planned, text), open_ledger(paths, backend, report.notes) \
            as ledger:
        atomic_write_text(paths.sweep_copy, text)
        ledger.set_meta(source_path=str(sweep_path.resolve()), study=sweep.study, backend=backend)
        report.new_points = sync_points(ledger, planned)
        reconciled = reconcile(paths, ledger, sweep, {backend: runner})
        alive = reconciled.alive
        report.notes += reconciled.notes
        todo = _select(report, planned, ledger)
        report.launched = len(todo)
        report.bytes_to_write = {p.point_id: p.layout().total_bytes * p.checkpoint.writes
                                 for p in todo if not p.problems()}
        if on_plan:
            on_plan(report)
        launch_points(paths, ledger, sweep, runner, todo, alive, progress, report.notes)
    return report
