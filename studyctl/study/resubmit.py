"""`resubmit`: a new attempt for each selected point (failed ones by default); history is kept."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from studyctl.backends import base
from studyctl.backends.capacity import judge
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.planning.expand import PlannedPoint
from studyctl.definition.planning.plan import plan_rows, summarize_plan
from studyctl.errors import UserError
from studyctl.states import ACTIVE_STATES, RETRYABLE_STATES, State
from studyctl.study.ledger import Ledger
from studyctl.study.lock import study_lock
from studyctl.study.reconcile import reconcile
from studyctl.study.recorder import ProgressHook
from studyctl.study.repair import open_ledger
from studyctl.study.store import find_study, load_current_sweep, planned_to_run, sync_points
from studyctl.study.submit import SubmitReport, launch_points, refuse_up_front


def _select(report: SubmitReport, planned: Sequence[PlannedPoint], ledger: Ledger, states: set[State],
            point_ids: Sequence[str], max_attempts: int | None) -> list[Point]:
    """The points to rerun: those named (unless still active), else those in `states`; not past max_attempts."""
    by_id = {pp.point.point_id: pp for pp in planned}
    unknown = [p for p in point_ids if p not in by_id]
    if unknown:
        raise UserError(f"--point: {', '.join(unknown)} not in study {report.study.name} "
                        f"(see 'studyctl sweep status {report.study.name}')")
    todo = []
    for row in ledger.points():
        pp = by_id.get(row.point_id)
        if pp is None or pp.excluded:
            continue
        if not (row.point_id in point_ids if point_ids else row.state in states):
            continue
        if row.state in ACTIVE_STATES:  # reconciled just now: its attempt is alive
            raise UserError(f"--point: {row.point_id} attempt {row.attempts} is still {row.state.value}; two attempts "
                            f"of a point never run at once (wait, or 'studyctl sweep cancel {report.study.name}')", 1)
        if max_attempts is not None and row.attempts >= max_attempts:
            report.waiting_for_failed += 1
            continue
        todo.append(pp.point)
    return todo


def resubmit(study_ref: str | Path, results: Path = Path("results"), states: Sequence[State] | None = None,
             point_ids: Sequence[str] = (), max_attempts: int | None = None, backend: str | None = None,
             progress: ProgressHook | None = None) -> SubmitReport:
    """A new attempt for each selected point, on `backend` or else the one the study was submitted with."""
    paths = find_study(study_ref, results)
    if backend is not None:
        base.check_name(backend)
    live = sorted(s.value for s in set(states or ()) & ACTIVE_STATES)
    if live:
        raise UserError(f"--state: {', '.join(live)} attempts are alive and never run twice; choose from "
                        f"{', '.join(sorted(s.value for s in RETRYABLE_STATES | {State.PLANNED}))}")
    notes: list[str] = []
    with study_lock(paths), open_ledger(paths, backend or base.DEFAULT, notes) as ledger:
        sweep = load_current_sweep(paths, ledger, update_copy=True, notes=notes)
        name = backend or ledger.meta("backend") or base.DEFAULT
        planned = planned_to_run(sweep, name, notes)
        sync_points(ledger, planned)
        runner = base.make(name, sweep, paths)
        reconciled = reconcile(paths, ledger, sweep, {name: runner})
        alive = reconciled.alive
        notes += reconciled.notes
        report = SubmitReport(paths, name, runner.runs_to_completion, points=len(planned), notes=notes)
        todo = _select(report, planned, ledger, set(states or RETRYABLE_STATES), point_ids, max_attempts)
        chosen_ids = {p.point_id for p in todo}  # as submit: what will not fit is refused up front
        chosen = [pp for pp in planned if pp.point.point_id in chosen_ids]
        refuse_up_front(paths.sweep_copy, judge(sweep, type(runner), chosen, summarize_plan(plan_rows(chosen, sweep))),
                        name)
        report.launched = len(todo)
        launch_points(paths, ledger, sweep, runner, todo, alive, progress, report.notes)
    return report
