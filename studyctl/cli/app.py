"""The command line: parses arguments, calls the library, prints. Nothing else lives here."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from studyctl.attempt.records import Update
from studyctl.errors import UserError
from studyctl.states import FINAL_STATES, State, shown_state
from studyctl.units import format_bytes

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Plan, run and report scaling studies of LLM checkpoint I/O.")
sweep_app = typer.Typer(no_args_is_help=True, help="Run a study: submit, status, resubmit, cancel.")
app.add_typer(sweep_app, name="sweep")
# Wide when piped (CI logs, files); the terminal's width otherwise.
out = Console(width=None if sys.stdout.isatty() else 180)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 180)
STATE = {"debug": False}
T = TypeVar("T")

ResultsOpt = Annotated[Path, typer.Option("--results", help="where study directories live")]


def _guard(fn: Callable[[], T]) -> T:
    """User errors become one line and an exit code; tracebacks only with --debug."""
    try:
        return fn()
    except UserError as exc:
        if STATE["debug"]:
            raise
        err.print(f"[bold red]studyctl: error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        err.print("studyctl: interrupted")
        raise typer.Exit(130) from None


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False) -> None:
    STATE["debug"] = debug


# ------------------------------------------------------------------ models
@app.command()
def models() -> None:
    """List the model catalog with DLIO's default layout and checkpoint size."""
    from studyctl.spec.catalog import CATALOG, DLIO_DEFAULT_LAYOUT
    from studyctl.spec.layout import Parallelism, num_parameters, summarize

    table = Table("model", "layers", "hidden", "ffn", "heads/kv", "vocab", "params", "DLIO layout",
                  "checkpoint")
    for name, m in CATALOG.items():
        tp, pp, zero = DLIO_DEFAULT_LAYOUT[name]
        par = Parallelism(tp, pp, 8 if zero == 3 else 2 if tp * pp > 1 else 8, zero)
        table.add_row(name, str(m.num_layers), str(m.hidden_size), str(m.ffn_hidden_size),
                      f"{m.num_attention_heads}/{m.num_kv_heads}", str(m.vocab_size),
                      f"{num_parameters(m) / 1e9:.3f} B", f"TP{tp} PP{pp} ZeRO-{zero}",
                      format_bytes(summarize(m, par).total_bytes))
    out.print(table)


# ------------------------------------------------------------------ plan
@app.command()
def plan(
    sweep: Annotated[Path, typer.Argument(help="sweep YAML file")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per point, streamed")] = False,
    budget_node_hours: Annotated[float | None, typer.Option(help="fail if the estimate exceeds this")] = None,
    limit: Annotated[int, typer.Option(help="rows shown in the table (0: all)")] = 40,
) -> None:
    """What each point writes, needs and costs, before spending a node-hour."""
    from studyctl.spec.expand import iter_points
    from studyctl.spec.plan import PlanSummary, plan_rows
    from studyctl.spec.sweep import load_sweep

    def run() -> None:
        spec = load_sweep(sweep)
        summary = PlanSummary()
        if as_json:
            write = sys.stdout.write
            write("[")
            for i, row in enumerate(plan_rows(iter_points(spec), spec)):
                summary.add(row)
                write(("\n" if i == 0 else ",\n") + json.dumps(row))
            write("\n]\n")
        else:
            rows = []
            for row in plan_rows(iter_points(spec), spec):
                summary.add(row)
                if not limit or len(rows) < limit:
                    rows.append(row)
            _print_plan(spec.study, rows, summary, limit)
        if budget_node_hours is not None and summary.node_hours > budget_node_hours:
            raise UserError(f"estimated {summary.node_hours:.2f} node-hours exceeds --budget-node-hours "
                            f"{budget_node_hours:g}", 1)

    _guard(run)


def _print_plan(study: str, rows: list[dict[str, Any]], summary: Any, limit: int) -> None:
    table = Table("point", "model", "ZeRO", "TP×PP×DP", "nodes×rpn", "fs", "io", "rep", "checkpoint",
                  "max/min per rank", "files", "mem/host worker", "mem/host DLIO", "disk", "node-h",
                  title=f"study {study}", title_justify="left")
    for r in rows:
        style = "dim" if r["excluded"] else None
        if r["excluded"] and r["checkpoint_bytes"] is None:
            sizes = [r["exclude_reason"], "", "", "", "", "", ""]
        else:
            sizes = [format_bytes(r["checkpoint_bytes"]),
                     f"{format_bytes(r['bytes_per_rank_max'])} / {format_bytes(r['bytes_per_rank_min'])}",
                     str(r["files_per_checkpoint"]), format_bytes(r["worker_memory_per_host_bytes"]),
                     format_bytes(r["dlio_memory_per_host_bytes"]), format_bytes(r["disk_bytes_needed"]),
                     "excluded" if r["excluded"] else f"{r['node_hours']:.3f}"]
        table.add_row(r["point_id"], r["model"], str(r["zero_stage"]),
                      f"{r['tensor_parallel']}×{r['pipeline_parallel']}×{r['data_parallel']}",
                      f"{r['nodes']}×{r['ranks_per_node']}", r["filesystem"], r["io_mode"], str(r["repetition"]),
                      *sizes, style=style)
    out.print(table)
    if limit and summary.points > len(rows):
        out.print(f"… {summary.points - len(rows)} more points (--limit 0 shows all, --json for scripts)")
    out.print(f"[bold]{summary.points}[/] points: {summary.runnable} to run, {summary.excluded} excluded")
    for axis, counts in summary.axis_counts.items():
        out.print(f"  {axis}: " + ", ".join(f"{k}×{v}" for k, v in counts.items()), highlight=False)
    for reason, n in summary.exclude_reasons.items():
        out.print(f"  excluded ×{n}: {reason}", highlight=False)
    out.print(f"to write {format_bytes(summary.bytes_to_write)}, to read {format_bytes(summary.bytes_to_read)}, "
              f"~{summary.node_hours:.2f} node-hours (estimate)")
    for fs, need in summary.max_disk_bytes_needed.items():
        out.print(f"  disk needed on {fs}: {format_bytes(need)} at the peak of the largest point")


# ------------------------------------------------------------------ sweep
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


def _bytes_by_point(sweep_path: Path) -> dict[str, int]:
    from studyctl.spec.expand import iter_points
    from studyctl.spec.sweep import load_sweep

    spec = load_sweep(sweep_path)
    return {pp.point.point_id: pp.point.layout().total_bytes * pp.point.checkpoint.writes
            for pp in iter_points(spec) if not pp.excluded}


@sweep_app.command("submit")
def sweep_submit(
    sweep: Annotated[Path, typer.Argument(help="sweep YAML file")],
    backend: Annotated[str, typer.Option(help="local | slurm")] = "local",
    results: ResultsOpt = Path("results"),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="plan and count, run nothing")] = False,
    budget_node_hours: Annotated[float | None, typer.Option(help="refuse to submit over this estimate")] = None,
) -> None:
    """Run a study's points that have not run yet (idempotent: completed and queued points are skipped)."""
    from studyctl import api as study

    def run() -> None:
        view: _ProgressView | None = None

        def on_plan(rep: study.SubmitReport) -> None:
            nonlocal view
            out.print(f"study [bold]{rep.study.name}[/]: {rep.points} points ({rep.excluded} excluded, "
                      f"{rep.new_points} new); {rep.skipped_completed} completed, {rep.skipped_active} queued/running, "
                      f"{rep.waiting_for_failed} failed (use resubmit); running {rep.launched} on {backend}")
            if rep.launched and backend == "local" and sys.stderr.isatty():
                view = _ProgressView(rep.launched, _bytes_by_point(sweep))
                view.bar.start()

        def progress(u: Update) -> None:
            if view is not None:
                view(u)
            elif u.state in FINAL_STATES:
                line = f"{u.point_id} attempt {u.attempt}: {u.state.value}"
                err.print(line + (f" — {u.reason}" if u.reason and u.state is not State.COMPLETED else ""),
                          highlight=False, soft_wrap=True)

        try:
            rep = study.submit(sweep, backend, results, dry_run, budget_node_hours, progress, on_plan)
        finally:
            if view is not None:
                view.bar.stop()
        if dry_run:
            out.print(f"dry run: {rep.points} points, {rep.excluded} excluded, {rep.launched} would run, "
                      f"~{rep.node_hours:.2f} node-hours; nothing submitted")
            return
        _print_after_run(rep.study, results, backend)

    _guard(run)


def _print_after_run(study_dir: Any, results: Path, backend: str) -> None:
    from studyctl import api as study

    rep = study.status(study_dir.root, results)
    out.print(_counts_line(rep.counts))
    if backend == "slurm" and not rep.done:
        out.print(f"submitted; follow with: studyctl sweep status {study_dir.name} --watch")
    failed = [p for p in rep.points if p.state in FINAL_STATES - {State.COMPLETED} and not p.excluded]
    if failed:
        out.print(f"{len(failed)} failed; rerun them with: studyctl sweep resubmit {study_dir.name}")
    out.print(f"results: {study_dir.root}")


def _counts_line(counts: Any) -> str:
    return "states: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _status_json(rep: Any) -> list[dict[str, Any]]:
    rows = []
    for p in rep.points:
        a = p.latest
        cfg = p.config
        rows.append({
            "point_id": p.point_id, "state": shown_state(p.state, p.excluded), "attempts": p.attempts,
            "model": cfg["model"]["name"], "zero_stage": cfg["zero_stage"], "nodes": cfg["nodes"],
            "ranks_per_node": cfg["ranks_per_node"], "filesystem": cfg["filesystem"], "io_mode": cfg["io_mode"],
            "repetition": cfg["repetition"], "exclude_reason": p.exclude_reason,
            "backend": a.backend if a else None, "job_id": a.job_id if a else None,
            "failure_class": a.failure_class if a else None, "reason": a.reason if a else None,
            "exit_code": a.exit_code if a else None, "node_list": a.node_list if a else None,
            "result_path": a.result_path if a else None,
        })
    return rows


def _status_table(rep: Any, limit: int) -> Table:
    table = Table("point", "state", "att", "model", "ZeRO", "nodes×rpn", "fs", "io", "rep", "job", "nodes",
                  "reason", title=f"study {rep.study.name}  ({_counts_line(rep.counts)})", title_justify="left")
    colours = {State.COMPLETED: "green", State.RUNNING: "yellow", State.FAILED: "red", State.TIMEOUT: "red",
               State.LOST: "red", State.CANCELLED: "magenta"}
    shown = sorted(rep.points, key=lambda p: (p.state is State.COMPLETED, p.excluded, p.run_order))
    for p in shown[: limit or None]:
        a, cfg = p.latest, p.config
        state = shown_state(p.state, p.excluded)
        colour = colours.get(p.state, "white") if not p.excluded else "dim"
        reason = p.exclude_reason if p.excluded else (a.reason if a and p.state is not State.COMPLETED else "")
        table.add_row(p.point_id, f"[{colour}]{state}[/]", str(p.attempts), cfg["model"]["name"],
                      str(cfg["zero_stage"]), f"{cfg['nodes']}×{cfg['ranks_per_node']}", cfg["filesystem"],
                      cfg["io_mode"], str(cfg["repetition"]), (a.job_id or (str(a.pid) if a.pid else "")) if a else "",
                      (a.node_list or "") if a else "", reason or "")
    captions = []
    if limit and len(shown) > limit:
        captions.append(f"{len(shown) - limit} more (completed last); --limit 0 shows all")
    if rep.backend_note:
        captions.append(f"[red]states may be stale: {escape(rep.backend_note)}[/]")
    table.caption = "\n".join(captions) or None
    return table


@sweep_app.command("status")
def sweep_status(
    study_ref: Annotated[str, typer.Argument(metavar="STUDY", help="study directory or name under --results")],
    results: ResultsOpt = Path("results"),
    as_json: Annotated[bool, typer.Option("--json")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="refresh until nothing is queued or running")] = False,
    interval: Annotated[float, typer.Option(help="--watch refresh period, seconds")] = 2.0,
    limit: Annotated[int, typer.Option(help="rows shown (0: all)")] = 50,
) -> None:
    """Where every point is: states, attempts, job ids, failure reasons."""
    from studyctl import api as study

    def run() -> None:
        rep = study.status(study_ref, results)
        if as_json:
            print(json.dumps({"study": rep.study.name, "counts": dict(rep.counts), "backend_note": rep.backend_note,
                              "points": _status_json(rep)}, indent=1))
            return
        if not watch:
            out.print(_status_table(rep, limit))
            return
        with Live(_status_table(rep, limit), console=out, refresh_per_second=2) as live:
            while not rep.done:
                time.sleep(interval)
                rep = study.status(study_ref, results)
                live.update(_status_table(rep, limit))

    _guard(run)


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


@sweep_app.command("resubmit")
def sweep_resubmit(
    study_ref: Annotated[str, typer.Argument(metavar="STUDY")],
    results: ResultsOpt = Path("results"),
    state: Annotated[str | None, typer.Option(help="comma-separated states (default: every failed state)")] = None,
    point: Annotated[list[str] | None, typer.Option(help="point id (repeatable)")] = None,
    max_attempts: Annotated[int | None, typer.Option(help="skip points with this many attempts already")] = None,
    backend: Annotated[str | None, typer.Option(help="default: the backend the study was submitted with")] = None,
) -> None:
    """Rerun only the selected points, each as a new attempt; history is kept."""
    from studyctl import api as study

    def run() -> None:
        def progress(u: Update) -> None:
            if u.state in FINAL_STATES:
                err.print(f"{u.point_id} attempt {u.attempt}: {u.state.value}"
                          + (f" — {u.reason}" if u.reason and u.state is not State.COMPLETED else ""),
                          highlight=False, soft_wrap=True)

        rep = study.resubmit(study_ref, results, _parse_states(state), point or (), max_attempts, backend, progress)
        out.print(f"resubmitted {rep.launched} points" + (f" ({rep.waiting_for_failed} at --max-attempts)"
                                                          if rep.waiting_for_failed else ""))
        _print_after_run(rep.study, results, backend or "local")

    _guard(run)


@sweep_app.command("cancel")
def sweep_cancel(study_ref: Annotated[str, typer.Argument(metavar="STUDY")], results: ResultsOpt = Path("results")
                 ) -> None:
    """Cancel every queued or running point of a study."""
    from studyctl import api as study

    _guard(lambda: out.print(f"cancelled {study.cancel(study_ref, results)} attempts"))


# ------------------------------------------------------------------ collect / compare
@app.command()
def collect(
    study_ref: Annotated[str, typer.Argument(metavar="STUDY")],
    results: ResultsOpt = Path("results"),
    import_dlio: Annotated[list[Path] | None, typer.Option(
        help="a DLIO output dir (summary.json) to add; repeat for several runs")] = None,
    ratio: Annotated[list[str] | None, typer.Option(
        help="AXIS=BASELINE, e.g. io_mode=buffered: each other value's ratio to the baseline, 95% CI; repeatable")
    ] = None,
) -> None:
    """Tables (CSV/Parquet), scaling plots (PNG) and a report (HTML/Markdown) from a study's results."""
    from studyctl import api

    def run() -> None:
        res = api.collect(study_ref, results, import_dlio or [], ratio or [])
        for line in res.summary_lines():
            out.print(line, highlight=False)

    _guard(run)


@app.command()
def compare(
    study_a: Annotated[str, typer.Argument(metavar="STUDY_A")],
    study_b: Annotated[str, typer.Argument(metavar="STUDY_B")],
    results: ResultsOpt = Path("results"),
    threshold: Annotated[str, typer.Option(help="regression threshold, e.g. 5% or 0.05")] = "5%",
) -> None:
    """B against A on shared settings; exit 0 no regression, 1 a cell regressed, 2 bad input or nothing comparable."""
    from studyctl import api

    def run() -> int:
        res = api.compare(study_a, study_b, results, threshold)
        for line in res.summary_lines():
            out.print(line, highlight=False)
        return 1 if res.any_regressed else 0

    code = _guard(run)
    raise typer.Exit(code)


def main() -> None:
    app()
