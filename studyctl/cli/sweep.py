"""`studyctl sweep submit|status|resubmit|cancel`: run a study and follow it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from studyctl.api import DEFAULT_BACKEND
from studyctl.cli.common import ResultsOpt, err, guard, out, styled
from studyctl.errors import UserError
from studyctl.states import FINAL_STATES, RETRYABLE_STATES, State, shown_state
from studyctl.units import format_bytes

if TYPE_CHECKING:
    from studyctl.api import StatusReport, SubmitReport, Update


class _ProgressView:
    """A rich progress bar fed by ledger updates: done / failed / running and bytes written."""

    def __init__(self, total: int, bytes_by_point: dict[str, int]) -> None:
        self.bytes_by_point = bytes_by_point
        self.done = self.failed = self.running = self.written = 0
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=err, transient=False)
        self.task = self.bar.add_task(self._text(), total=total)

    def _text(self) -> str:
        return (f"[green]{self.done} done[/] [red]{self.failed} failed[/] [yellow]{self.running} running[/] "
                f"{format_bytes(self.written)} written")

    def __call__(self, u: Update) -> None:
        if u.state is State.RUNNING:
            self.running += 1
        elif u.state in FINAL_STATES:
            self.running = max(0, self.running - 1)
            if u.state is State.COMPLETED:
                self.done += 1
                self.written += self.bytes_by_point.get(u.point_id, 0)
            else:
                self.failed += 1
            self.bar.advance(self.task)
        self.bar.update(self.task, description=self._text())


def sweep_submit(
    sweep: Annotated[Path, typer.Argument(help="sweep YAML file")],
    backend: Annotated[str, typer.Option(help="local | slurm")] = DEFAULT_BACKEND,
    results: ResultsOpt = Path("results"),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="plan and count, run nothing")] = False,
    budget_node_hours: Annotated[float | None, typer.Option(min=0, help="refuse to submit over this estimate")] = None,
) -> None:
    """Run a study's points that have not run yet (idempotent: completed and queued points are skipped).

    Exit codes: 0 every point completed (or is queued, for a backend that returns once submitted);
    1 some point of the study ended failed (FAILED, TIMEOUT, LOST, CANCELLED, ...) or never ran (PLANNED);
    2 bad input.
    """
    from studyctl import api as study

    def run() -> None:
        view: _ProgressView | None = None

        def on_plan(rep: study.SubmitReport) -> None:
            nonlocal view
            out.print(styled("study ", (rep.study.name, "bold"), f": {rep.points} points ({rep.excluded} excluded, "
                      f"{rep.new_points} new); {rep.skipped_completed} completed, {rep.skipped_active} queued/running, "
                      f"{rep.waiting_for_failed} failed (use resubmit); running {rep.launched} on {rep.backend}"))
            if rep.launched and rep.runs_to_completion and sys.stderr.isatty():
                view = _ProgressView(rep.launched, rep.bytes_to_write)
                view.bar.start()

        def progress(u: Update) -> None:
            if view is not None:
                view(u)
            elif u.state in FINAL_STATES:
                line = f"{u.point_id} attempt {u.attempt}: {u.state.value}"
                err.print(line + (f" — {u.reason}" if u.reason and u.state is not State.COMPLETED else ""))

        try:
            rep = study.submit(sweep, backend, results, dry_run, budget_node_hours, progress, on_plan)
        finally:
            if view is not None:
                view.bar.stop()
        if dry_run:
            for note in rep.notes:
                err.print(f"studyctl: {note}")
            out.print(f"dry run: {rep.points} points, {rep.excluded} excluded, {rep.launched} would run, "
                      f"~{rep.node_hours:.2f} node-hours; nothing submitted")
            return
        _print_after_run(rep, results)

    guard(run)


def _print_after_run(submitted: SubmitReport, results: Path) -> None:
    """The study's states after a run; exit code 1 (typer.Exit) when any point of it ended failed or never ran."""
    from studyctl import api as study

    study_dir = submitted.study
    for note in submitted.notes:
        err.print(f"studyctl: {note}")
    rep = study.status(study_dir.root, results)
    out.print(_counts_line(rep.counts))
    if not submitted.runs_to_completion and not rep.done:
        out.print(f"submitted; follow with: studyctl sweep status {study_dir.name} --watch")
    failed = [p for p in rep.points if p.state in RETRYABLE_STATES and not p.excluded]
    if failed:
        out.print(f"{len(failed)} failed; rerun them with: studyctl sweep resubmit {study_dir.name}")
    unrun = [p for p in rep.points if p.state is State.PLANNED and not p.excluded]
    if unrun:
        out.print(f"{len(unrun)} not run yet (PLANNED); run them with: studyctl sweep submit {study_dir.sweep_copy}")
    out.print(f"results: {study_dir.root}")
    if failed or unrun:
        raise typer.Exit(1)


def _counts_line(counts: Any) -> str:
    return "states: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _status_json(rep: StatusReport) -> list[dict[str, Any]]:
    rows = []
    for p in rep.points:
        a, pt = p.latest, p.point
        rows.append({
            "point_id": p.point_id, "state": shown_state(p.state, p.excluded), "attempts": p.attempts,
            "model": pt.model.name, "zero_stage": pt.zero_stage, "nodes": pt.nodes,
            "ranks_per_node": pt.ranks_per_node, "filesystem": pt.filesystem, "io_mode": pt.io_mode,
            "repetition": pt.repetition, "role": pt.role, "exclude_reason": p.exclude_reason,
            "backend": a.backend if a else None, "job_id": a.job_id if a else None,
            "failure_class": a.failure_class if a else None, "reason": a.reason if a else None,
            "exit_code": a.exit_code if a else None, "node_list": a.node_list if a else None,
            "result_path": a.result_path if a else None,
        })
    return rows


STATUS_SHOWN = ("model", "zero_stage", "nodes", "ranks_per_node", "filesystem", "io_mode")  # the table's columns


def _status_table(rep: StatusReport, limit: int) -> Table:
    from studyctl import api

    told = dict(zip((p.point_id for p in rep.points), api.told_settings([p.point for p in rep.points],
                                                                         STATUS_SHOWN), strict=True))
    shown_told = any(told.values())  # a column only where some point needs one
    table = Table("point", "state", "att", "model", "ZeRO", "nodes×rpn", "fs", "io", "rep",
                  *(["settings"] * shown_told), "job", "nodes", "reason",
                  title=f"study {rep.study.name}  ({_counts_line(rep.counts)})", title_justify="left")
    colours = {State.COMPLETED: "green", State.RUNNING: "yellow", State.FAILED: "red", State.TIMEOUT: "red",
               State.LOST: "red", State.CANCELLED: "magenta"}
    shown = sorted(rep.points, key=lambda p: (p.state is State.COMPLETED, p.excluded, p.run_order))
    for p in shown[: limit or None]:
        a, pt = p.latest, p.point
        state = shown_state(p.state, p.excluded)
        colour = colours.get(p.state, "white") if not p.excluded else "dim"
        reason = p.exclude_reason if p.excluded else (a.reason if a and p.state is not State.COMPLETED else "")
        point = p.point_id + ("" if pt.role == "measure" else f" {pt.role}")  # a study's own auxiliary point
        settings = [told[p.point_id]] if shown_told else []
        table.add_row(point, Text(state, style=colour), str(p.attempts), pt.model.name,
                      str(pt.zero_stage), f"{pt.nodes}×{pt.ranks_per_node}", pt.filesystem,
                      pt.io_mode, str(pt.repetition), *settings, (a.job_id or (str(a.pid) if a.pid else "")) if a
                      else "", (a.node_list or "") if a else "", reason or "")
    captions: list[tuple[str, str]] = []
    if limit and len(shown) > limit:
        captions.append((f"{len(shown) - limit} more (completed last); --limit 0 shows all", ""))
    if rep.backend_note:
        captions.append((f"states may be stale: {rep.backend_note}", "red"))
    captions += [(note, "yellow") for note in rep.notes]
    table.caption = Text("\n").join(Text(text, style=style) for text, style in captions) if captions else None
    return table


def sweep_status(
    study_ref: Annotated[str, typer.Argument(metavar="STUDY", help="study directory or name under --results")],
    results: ResultsOpt = Path("results"),
    as_json: Annotated[bool, typer.Option("--json")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="refresh until nothing is queued or running")] = False,
    interval: Annotated[float, typer.Option(min=0.1, help="--watch refresh period, seconds")] = 2.0,
    limit: Annotated[int, typer.Option(min=0, help="rows shown (0: all)")] = 50,
) -> None:
    """Where every point is: states, attempts, job ids, failure reasons."""
    from studyctl import api as study

    def run() -> None:
        rep = study.status(study_ref, results)
        if as_json:
            print(json.dumps({"study": rep.study.name, "counts": dict(rep.counts), "backend_note": rep.backend_note,
                              "notes": rep.notes, "points": _status_json(rep)}, indent=1))
            return
        if not watch:
            out.print(_status_table(rep, limit))
            return
        with Live(_status_table(rep, limit), console=out, refresh_per_second=2) as live:
            while not rep.done:
                time.sleep(interval)
                rep = study.status(study_ref, results)
                live.update(_status_table(rep, limit))

    guard(run)


def _parse_states(text: str | None) -> list[State] | None:
    if not text:
        return None
    states = []
    for part in text.split(","):
        name = part.strip().upper()
        if name not in State.__members__:
            raise UserError(f"--state: {part.strip()!r} is not one of {', '.join(State.__members__)}")
        states.append(State(name))
    return states


def sweep_resubmit(
    study_ref: Annotated[str, typer.Argument(metavar="STUDY")],
    results: ResultsOpt = Path("results"),
    state: Annotated[str | None, typer.Option(help="comma-separated states (default: every failed state)")] = None,
    point: Annotated[list[str] | None, typer.Option(help="point id (repeatable)")] = None,
    max_attempts: Annotated[int | None, typer.Option(min=1, help="skip points with this many attempts already")] = None,
    backend: Annotated[str | None, typer.Option(help="default: the backend the study was submitted with")] = None,
) -> None:
    """Rerun only the selected points, each as a new attempt; history is kept.

    Exit codes: 0 every point completed (or is queued, for a backend that returns once submitted);
    1 some point of the study ended failed (FAILED, TIMEOUT, LOST, CANCELLED, ...) or never ran (PLANNED);
    2 bad input.
    """
    from studyctl import api as study

    def run() -> None:
        def progress(u: Update) -> None:
            if u.state in FINAL_STATES:
                err.print(f"{u.point_id} attempt {u.attempt}: {u.state.value}"
                          + (f" — {u.reason}" if u.reason and u.state is not State.COMPLETED else ""))

        rep = study.resubmit(study_ref, results, _parse_states(state), point or (), max_attempts, backend, progress)
        out.print(f"resubmitted {rep.launched} points" + (f" ({rep.waiting_for_failed} at --max-attempts)"
                                                          if rep.waiting_for_failed else ""))
        _print_after_run(rep, results)

    guard(run)


def sweep_cancel(study_ref: Annotated[str, typer.Argument(metavar="STUDY")], results: ResultsOpt = Path("results")
                 ) -> None:
    """Cancel every queued or running point of a study."""
    from studyctl import api as study

    guard(lambda: out.print(f"cancelled {study.cancel(study_ref, results)} attempts"))
