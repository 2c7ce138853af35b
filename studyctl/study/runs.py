"""A study on disk: submit, reconcile, resubmit, status, cancel (the library the CLI calls).

Layout of `results/<study>/`:
    sweep.yaml                        the sweep file as last submitted
    ledger.sqlite                     points and every attempt (see ledger.py)
    points/<point_id>/attempt-<n>/    task.json, result.json | error.json, stdout.log, stderr.log
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.records import Active, Handle, Launch, Update
from studyctl.backends.base import Backend
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text
from studyctl.spec.expand import PlannedPoint, expand
from studyctl.spec.plan import plan_rows, summarize_plan
from studyctl.spec.points import Point, WorkerTask
from studyctl.spec.sweep import SweepFile, load_sweep
from studyctl.states import ACTIVE_STATES, RETRYABLE_STATES, FailureClass, State, shown_state
from studyctl.study.ledger import AttemptRow, Ledger, PointRow

BACKENDS = ("local", "slurm")
# An attempt with no job id this long after submission, and no job under its name, never reached Slurm.
NEVER_SUBMITTED_AFTER_S = 120.0
ProgressHook = Callable[[Update], None]


# ------------------------------------------------------------------ paths
@dataclass(frozen=True)
class StudyDir:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def ledger_path(self) -> Path:
        return self.root / "ledger.sqlite"

    @property
    def sweep_copy(self) -> Path:
        return self.root / "sweep.yaml"

    def attempt_dir(self, point_id: str, attempt: int) -> Path:
        return self.root / "points" / point_id / f"attempt-{attempt}"

    def open_ledger(self) -> Ledger:
        return Ledger(self.ledger_path)


def find_study(study: str | Path, results: Path = Path("results")) -> StudyDir:
    """STUDY is a study directory or a study name under `results`."""
    for candidate in (Path(study), results / str(study)):
        if (candidate / "ledger.sqlite").is_file():
            return StudyDir(candidate.absolute())
    raise UserError(f"no study {str(study)!r}: neither a study directory nor a name under {results}/ "
                    "(run 'studyctl sweep submit SWEEP.yaml' first)")


@contextmanager
def study_lock(root: Path) -> Iterator[None]:
    """One runner per study; a killed runner's lock goes with its process."""
    root.mkdir(parents=True, exist_ok=True)
    fh = (root / ".lock").open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise UserError(f"{root}: another studyctl is running this study; wait for it or "
                        "'studyctl sweep cancel' it", 1) from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def runner_active(root: Path) -> bool:
    try:
        fh = (root / ".lock").open("a+")
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


# ------------------------------------------------------------------ backends
def make_backend(name: str, sweep: SweepFile, study: StudyDir) -> Backend:
    if name == "local":
        from studyctl.backends.local import LocalBackend

        return LocalBackend(sweep.local)
    if name == "slurm":
        from studyctl.backends.slurm import SlurmBackend

        return SlurmBackend(sweep.slurm, study.root / "slurm")
    raise UserError(f"--backend: {name!r} is not one of {', '.join(BACKENDS)}")


def _time_limit_s(sweep: SweepFile, backend: str, point: Point) -> int | None:
    if backend == "local":
        return sweep.local.timeout_s
    return None  # the Slurm backend derives its own from its options


# ------------------------------------------------------------------ reports
@dataclass
class SubmitReport:
    study: StudyDir
    points: int = 0
    excluded: int = 0
    new_points: int = 0
    launched: int = 0
    skipped_completed: int = 0
    skipped_active: int = 0
    waiting_for_failed: int = 0  # FAILED/TIMEOUT/...: resubmit reruns them
    node_hours: float = 0.0
    states: Counter = field(default_factory=Counter)


@dataclass
class StatusReport:
    study: StudyDir
    points: list[PointRow]
    counts: Counter
    backend_note: str | None = None

    @property
    def done(self) -> bool:
        return not any(p.state in ACTIVE_STATES for p in self.points if not p.excluded)


# ------------------------------------------------------------------ core
def _task_for(study: StudyDir, sweep: SweepFile, point: Point, point_id: str, attempt: int) -> Path:
    adir = study.attempt_dir(point_id, attempt)
    adir.mkdir(parents=True, exist_ok=True)
    fs_path = sweep.filesystems[point.filesystem].path
    task = WorkerTask(study=study.name, point_id=point_id, attempt=attempt, point=point, filesystem_path=fs_path,
                      result_path=str(adir / "result.json"), error_path=str(adir / "error.json"))
    path = adir / "task.json"
    atomic_write_text(path, task.model_dump_json(indent=1))
    return path


def _launch_for(study: StudyDir, sweep: SweepFile, backend: str, point: Point, point_id: str,
                attempt: int) -> Launch:
    task = _task_for(study, sweep, point, point_id, attempt)
    return Launch(study=study.name, point_id=point_id, attempt=attempt, point=point, task_file=task,
                  attempt_dir=task.parent, time_limit_s=_time_limit_s(sweep, backend, point))


def _existing_launch(study: StudyDir, row: AttemptRow) -> Launch | None:
    adir = study.attempt_dir(row.point_id, row.attempt)
    try:
        task = WorkerTask.model_validate_json((adir / "task.json").read_text())
    except (OSError, ValueError):
        return None
    return Launch(study=study.name, point_id=row.point_id, attempt=row.attempt, point=task.point,
                  task_file=adir / "task.json", attempt_dir=adir, time_limit_s=None)


def _cleanup_point_data(study: StudyDir, sweep: SweepFile | None, update: Update, point: Point | None) -> None:
    """After a kill (timeout, cancel, lost) the worker could not clean up: remove its point directory only."""
    killed = (State.TIMEOUT, State.CANCELLED, State.LOST, State.PREEMPTED, State.NODE_FAIL, State.OUT_OF_MEMORY)
    if sweep is None or point is None or update.state not in killed:
        return
    fs = sweep.filesystems.get(point.filesystem)
    if fs is None:
        return
    target = Path(fs.path) / study.name / update.point_id
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, ignore_errors=True)


class _Recorder:
    """Ledger writes for a backend's callbacks, plus result paths, cleanup and a progress hook."""

    def __init__(self, study: StudyDir, ledger: Ledger, sweep: SweepFile | None,
                 points: dict[str, Point], progress: ProgressHook | None) -> None:
        self.study, self.ledger, self.sweep, self.points, self.progress = study, ledger, sweep, points, progress

    def handle(self, launch: Launch, handle: Handle) -> None:
        self.ledger.record_handles([(launch.point_id, launch.attempt, handle)])

    def update(self, update: Update) -> None:
        self.updates([update])

    def updates(self, updates: Sequence[Update]) -> None:
        paths = {}
        for u in updates:
            if u.state is State.COMPLETED:
                paths[(u.point_id, u.attempt)] = str(self.study.attempt_dir(u.point_id, u.attempt) / "result.json")
            _cleanup_point_data(self.study, self.sweep, u, self.points.get(u.point_id))
        self.ledger.record_updates(updates, paths)
        if self.progress:
            for u in updates:
                self.progress(u)


def reconcile(study: StudyDir, ledger: Ledger, sweep: SweepFile | None,
              backends: dict[str, Backend] | None = None,
              notes: list[str] | None = None) -> list[tuple[Active, float]]:
    """Bring attempts the ledger calls active up to date: result files first, then each backend.

    Returns the local attempts that are still running (an earlier studyctl started them). `notes`
    receives why a backend's states may be stale (e.g. sacct failing), for the user to see.
    """
    active_rows = ledger.active_attempts()
    if not active_rows:
        return []
    recorder = _Recorder(study, ledger, sweep, {}, None)
    by_backend: dict[str, list[tuple[Active, float]]] = {}
    file_updates = []
    for row in active_rows:
        launch = _existing_launch(study, row)
        if launch is None:
            file_updates.append(Update(row.point_id, row.attempt, State.LOST, None,
                                       "attempt directory or task.json missing", ended_at=time.time()))
            continue
        recorder.points[row.point_id] = launch.point
        outcome = read_outcome(launch.attempt_dir, row.point_id, row.attempt)
        if outcome is not None and outcome.state is State.COMPLETED:
            file_updates.append(outcome)
            continue
        active = Active(launch, row.handle, row.submitted_at)
        by_backend.setdefault(row.backend, []).append((active, row.started_at or row.submitted_at))
    recorder.updates(file_updates)
    still_running: list[tuple[Active, float]] = []
    for name, actives in by_backend.items():
        backend = (backends or {}).get(name)
        if backend is None:
            if sweep is None:
                continue
            backend = make_backend(name, sweep, study)
        recover = getattr(backend, "recover_handles", None)
        if recover is not None:  # a runner died between sbatch and recording the job ids
            found = recover(study.name, [a for a, _ in actives])
            ledger.record_handles([(a.launch.point_id, a.launch.attempt, h) for a, h in found])
            fixed = {id(a): Active(a.launch, h, a.since) for a, h in found}
            actives = [(fixed.get(id(a), a), t) for a, t in actives]
            never = [a for a, t in actives if not a.handle.job_id and time.time() - t > NEVER_SUBMITTED_AFTER_S]
            recorder.updates([Update(a.launch.point_id, a.launch.attempt, State.LOST, FailureClass.LOST,
                                     "never reached the scheduler (studyctl stopped before sbatch returned)",
                                     ended_at=time.time()) for a in never])
        updates = backend.poll([a for a, _ in actives])
        recorder.updates(updates)
        note = getattr(backend, "note", None)
        if note and notes is not None:
            notes.append(f"{name}: {note}")
        if name == "local":
            gone = {(u.point_id, u.attempt) for u in updates}
            still_running += [(a, t) for a, t in actives if (a.launch.point_id, a.launch.attempt) not in gone]
    return still_running


def _load_current_sweep(study: StudyDir, ledger: Ledger, update_copy: bool = False) -> SweepFile:
    """The sweep file the study came from if it still exists (it may have been fixed), else our copy.

    `update_copy`: the study is about to run from it, so it becomes the study's recorded sweep.
    """
    source = ledger.meta("source_path")
    if source and Path(source).is_file():
        sweep = load_sweep(Path(source))
        if sweep.study == study.name:
            if update_copy:
                atomic_write_text(study.sweep_copy, Path(source).read_text())
            return sweep
    return load_sweep(study.sweep_copy)


def _sync(ledger: Ledger, planned: Sequence[PlannedPoint]) -> int:
    return ledger.sync_points(
        (pp.point.point_id, pp.order, pp.point.canonical(), pp.exclusion is not None,
         pp.exclusion.describe() if pp.exclusion else None) for pp in planned
    )


def _run(study: StudyDir, ledger: Ledger, sweep: SweepFile, backend_name: str, todo: Sequence[Point],
         adopted: list[tuple[Active, float]], progress: ProgressHook | None) -> int:
    backend = make_backend(backend_name, sweep, study)
    # Local points wait in our own queue: PLANNED until their process starts (a kill -9 leaves them PLANNED).
    initial = State.PLANNED if backend_name == "local" else State.SUBMITTED
    numbers = ledger.new_attempts([(p.point_id, backend_name) for p in todo], initial) if todo else {}
    launches = [_launch_for(study, sweep, backend_name, p, p.point_id, numbers[p.point_id]) for p in todo]
    recorder = _Recorder(study, ledger, sweep, {p.point_id: p for p in todo}, progress)
    for active, _ in adopted:
        recorder.points[active.launch.point_id] = active.launch.point
    if backend_name == "local":
        backend.launch(launches, recorder.handle, recorder.update, adopted=adopted)  # type: ignore[call-arg]
    else:
        backend.launch(launches, recorder.handle, recorder.update)
    return len(launches)


def submit(sweep_path: Path, backend: str = "local", results: Path = Path("results"), dry_run: bool = False,
           budget_node_hours: float | None = None, progress: ProgressHook | None = None,
           on_plan: Callable[[SubmitReport], None] | None = None) -> SubmitReport:
    """Plan the sweep, record it, and run what has not run: new, PLANNED and LOST points.

    Idempotent: completed and queued points are skipped; FAILED/TIMEOUT/... wait for `resubmit`.
    """
    if backend not in BACKENDS:
        raise UserError(f"--backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    sweep = load_sweep(sweep_path)
    planned = expand(sweep)
    summary = summarize_plan(plan_rows(planned, sweep))
    if budget_node_hours is not None and summary.node_hours > budget_node_hours:
        raise UserError(f"the study needs an estimated {summary.node_hours:.2f} node-hours, over the budget of "
                        f"{budget_node_hours:g} (--budget-node-hours); nothing was submitted", 1)
    study = StudyDir((results / sweep.study).resolve())
    report = SubmitReport(study, points=len(planned), excluded=summary.excluded, node_hours=summary.node_hours)
    if dry_run:
        report.launched = summary.runnable
        return report
    with study_lock(study.root), study.open_ledger() as ledger:
        atomic_write_text(study.sweep_copy, sweep_path.read_text())
        ledger.set_meta(source_path=str(sweep_path.resolve()), study=sweep.study, backend=backend)
        report.new_points = _sync(ledger, planned)
        adopted = reconcile(study, ledger, sweep)
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
        report.launched = len(todo)
        if on_plan:
            on_plan(report)
        _run(study, ledger, sweep, backend, todo, adopted, progress)
    return report


def resubmit(study_ref: str | Path, results: Path = Path("results"), states: Sequence[State] | None = None,
             point_ids: Sequence[str] = (), max_attempts: int | None = None, backend: str | None = None,
             progress: ProgressHook | None = None) -> SubmitReport:
    """A new attempt for each selected point (failed ones by default); history is kept."""
    study = find_study(study_ref, results)
    wanted = set(states or RETRYABLE_STATES)
    with study_lock(study.root), study.open_ledger() as ledger:
        sweep = _load_current_sweep(study, ledger, update_copy=True)
        planned = expand(sweep)
        _sync(ledger, planned)
        adopted = reconcile(study, ledger, sweep)
        backend = backend or ledger.meta("backend") or "local"
        by_id = {pp.point.point_id: pp for pp in planned}
        unknown = [p for p in point_ids if p not in by_id]
        if unknown:
            raise UserError(f"--point: {', '.join(unknown)} not in study {study.name} "
                            f"(see 'studyctl sweep status {study.name}')")
        report = SubmitReport(study, points=len(planned))
        todo = []
        for row in ledger.points():
            pp = by_id.get(row.point_id)
            if pp is None or pp.excluded:
                continue
            selected = row.point_id in point_ids if point_ids else row.state in wanted
            if point_ids and row.state in ACTIVE_STATES:
                selected = False
            if not selected:
                continue
            if max_attempts is not None and row.attempts >= max_attempts:
                report.waiting_for_failed += 1
                continue
            todo.append(pp.point)
        report.launched = len(todo)
        _run(study, ledger, sweep, backend, todo, adopted, progress)
    return report


def status(study_ref: str | Path, results: Path = Path("results")) -> StatusReport:
    """Points by state. Reconciles first unless a runner holds the study (it keeps the ledger current)."""
    study = find_study(study_ref, results)
    notes: list[str] = []
    with study.open_ledger() as ledger:
        if not runner_active(study.root):
            try:
                sweep = _load_current_sweep(study, ledger)
            except UserError:
                sweep = None
            reconcile(study, ledger, sweep, notes=notes)
        points = ledger.points()
    counts = Counter(shown_state(p.state, p.excluded) for p in points)
    return StatusReport(study, points, counts, "; ".join(notes) or None)


def cancel(study_ref: str | Path, results: Path = Path("results")) -> int:
    """Cancel every queued or running attempt; returns how many."""
    study = find_study(study_ref, results)
    with study.open_ledger() as ledger:
        sweep = _load_current_sweep(study, ledger)
        rows = ledger.active_attempts()
        by_backend: dict[str, list[Active]] = {}
        for row in rows:
            launch = _existing_launch(study, row)
            if launch is not None:
                by_backend.setdefault(row.backend, []).append(Active(launch, row.handle))
        recorder = _Recorder(study, ledger, None, {}, None)
        # Record first: a runner that sees its process die afterwards cannot turn this into FAILED.
        recorder.updates([Update(r.point_id, r.attempt, State.CANCELLED, FailureClass.CANCELLED,
                                 "cancelled by 'studyctl sweep cancel'", ended_at=time.time()) for r in rows])
        for name, actives in by_backend.items():
            make_backend(name, sweep, study).cancel(actives)
        recorder.sweep = sweep
        for actives in by_backend.values():
            for a in actives:
                recorder.points[a.launch.point_id] = a.launch.point
                _cleanup_point_data(study, sweep, Update(a.launch.point_id, a.launch.attempt, State.CANCELLED),
                                    a.launch.point)
    return len(rows)
