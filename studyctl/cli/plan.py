"""`studyctl plan`: what each point writes, needs and costs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from studyctl.api import DEFAULT_BACKEND
from studyctl.cli.common import err, guard, out, styled
from studyctl.cli.plan_restarts import collect_restart, print_restarts
from studyctl.errors import UserError
from studyctl.units import format_bytes

if TYPE_CHECKING:
    from studyctl.api import PlanRow, PlanSummary, SizedColumns, TrainingNeeds


def plan(
    sweep: Annotated[Path, typer.Argument(help="sweep YAML file")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per point, streamed")] = False,
    budget_node_hours: Annotated[float | None, typer.Option(min=0, help="fail if the estimate exceeds this")] = None,
    limit: Annotated[int, typer.Option(min=0, help="rows shown in the table (0: all)")] = 40,
    backend: Annotated[str, typer.Option(
        help="where it will run: whose free space and memory to check")] = DEFAULT_BACKEND,
    strict: Annotated[bool, typer.Option(help="exit 1 when disk or memory will not suffice")] = False,
) -> None:
    """What each point writes, needs and costs, and whether disk and memory suffice, before a node-hour."""
    from studyctl import api

    def run() -> None:
        planned = api.plan(sweep, backend)  # an unknown backend: one line, exit 2, before any row (as in submit)
        if as_json:
            write = sys.stdout.write
            write("[")
            for i, row in enumerate(planned.rows()):
                write(("\n" if i == 0 else ",\n") + json.dumps(row.json()))
            write("\n]\n")
        else:
            rows: list[PlanRow] = []
            restarts: dict[tuple, PlanRow] = {}
            for row in planned.rows():
                if not limit or len(rows) < limit:
                    rows.append(row)
                collect_restart(restarts, row)
            _print_plan(planned.sweep.study, rows, planned.summary, limit)
            print_restarts(restarts)
            lines = planned.projection_lines()
            if lines:
                out.print("projections to full size, per resource shape and fit group:")
                for line in lines:
                    out.print("  " + line)
        from studyctl.cli.capacity import print_capacity

        problems = print_capacity(err, planned)
        planned.check_budget(budget_node_hours)
        if strict and problems:
            raise UserError(f"{len(problems)} capacity problem(s) above (--strict)", 1)

    guard(run)


def _print_plan(study: str, rows: list[PlanRow], summary: PlanSummary, limit: int) -> None:
    table = Table("point", "model", "ZeRO", "TP×PP×DP", "nodes×rpn", "fs", "io", "restore", "rep", "checkpoint",
                  "max/min per rank", "files", "mem/host worker", "mem/host DLIO", "disk", "node-h",
                  title=f"study {study}", title_justify="left")
    for r in rows:
        style = "dim" if r.excluded else None
        s = r.sized
        if s is None:  # an impossible layout
            sizes = [r.exclude_reason or "", "", "", "", "", "", ""]
        else:
            sizes = [format_bytes(s.checkpoint_bytes) + _restore_bytes(s),
                     f"{format_bytes(s.bytes_per_rank_max)} / {format_bytes(s.bytes_per_rank_min)}",
                     str(s.files_per_checkpoint) + _engine_files(r, s) + _requests(r),
                     format_bytes(s.worker_memory_per_host_bytes) + _tensors(s),
                     format_bytes(s.dlio_memory_per_host_bytes), format_bytes(s.disk_bytes_needed),
                     "excluded" if r.excluded else f"{s.node_hours:.3f}"]
        point = r.point_id + ("" if r.role == "measure" else f" {r.role}")
        table.add_row(point, r.model, str(r.zero_stage), f"{r.tensor_parallel}×{r.pipeline_parallel}×{r.data_parallel}",
                      f"{r.nodes}×{r.ranks_per_node}", r.filesystem,
                      r.io_mode + ("" if r.fsync else ", no fsync") + _engine(r),
                      f"{r.restore}+{r.rank_shift} {r.block_mib}M {r.cold_read}", str(r.repetition),
                      *sizes, style=style)
    out.print(table)
    if limit and summary.points > len(rows):
        out.print(f"… {summary.points - len(rows)} more points (--limit 0 shows all, --json for scripts)")
    out.print(styled((str(summary.points), "bold"), f" points: {summary.runnable} to run, {summary.excluded} excluded"))
    for axis, counts in summary.axis_counts.items():
        out.print(f"  {axis}: " + ", ".join(f"{k}×{v}" for k, v in counts.items()))
    for reason, n in summary.exclude_reasons.items():
        out.print(f"  excluded ×{n}: {reason}")
    bcast = f" (and {format_bytes(summary.bytes_to_broadcast)} delivered by MPI broadcast)" \
        if summary.bytes_to_broadcast else ""
    out.print(f"to write {format_bytes(summary.bytes_to_write)}, to read {format_bytes(summary.bytes_to_read)} "
              f"from storage{bcast}, ~{summary.node_hours:.2f} node-hours (estimate)")
    for role, aux in summary.auxiliary.items():
        out.print(f"  of which {role} points: {aux['points']:.0f}, moving {format_bytes(int(aux['bytes']))}, "
                  f"~{aux['node_hours']:.2f} node-hours")
    if summary.auxiliary:
        (points, p_share), (moved, b_share), (hours, h_share) = summary.extras().values()
        out.print(f"  the study's own extras ({' and '.join(summary.auxiliary)} points): {points:.0f} of "
                  f"{summary.runnable} points ({p_share:.1%}), {format_bytes(int(moved))} of the bytes moved "
                  f"({b_share:.1%}), {hours:.2f} of the node-hours ({h_share:.1%})")
    for fs, need in summary.max_disk_bytes_needed.items():
        out.print(f"  disk needed on {fs}: {format_bytes(need)} at the peak of the largest point")
    _print_needs(summary.training_needs)


def _engine(r: PlanRow) -> str:
    """The engine, device, state convention and replicated writer, where they are not the defaults."""
    return f", {r.engine_label}" if r.engine_label else ""


def _engine_files(r: PlanRow, s: SizedColumns) -> str:
    return "" if r.engine == "stream" else f" ({s.engine_files})"


def _tensors(s: SizedColumns) -> str:
    """An engine point's real tensors, included in the worker's memory."""
    return f" ({format_bytes(s.tensor_memory_per_host_bytes)} tensors)" if s.tensor_memory_per_host_bytes else ""


def _requests(r: PlanRow) -> str:
    """On an object store: the requests a checkpoint and a restore make (the busiest rank's in brackets)."""
    o = r.objects
    if o is None:
        return ""
    return (f" objects; {o.put_requests_per_checkpoint} PUT+{o.part_requests_per_checkpoint} part "
            f"(rank ≤{o.write_requests_per_rank_max}), {o.get_requests_per_restore} GET/restore (rank "
            f"≤{o.read_requests_per_rank_max}) at {o.part_mib} MiB ×{o.s3_concurrency}")


def _restore_bytes(s: SizedColumns) -> str:
    """What a restore reads from storage, and delivers by broadcast, where that differs from the checkpoint."""
    read, bcast = s.storage_read_bytes_per_restore, s.broadcast_bytes_per_restore
    text = "" if read == s.checkpoint_bytes else f", restore reads {format_bytes(read)}"
    return text + (f", broadcast delivers {format_bytes(bcast)}" if bcast else "")


def _print_needs(needs: dict[tuple[str, str, int, str], PlanRow], limit: int = 12) -> None:
    """The inverse question: the bandwidth that keeps the waste of checkpointing under the target, with every
    input of the model and which figures are projections."""
    if not needs:
        return
    first = next(iter(needs.values()))
    out.print(f"what checkpoints may cost training: keep total waste (checkpoints + rework + restarts, Daly's "
              f"complete model) under {_needs(first).target_overhead:.0%} of wall time")
    for line in _input_lines(first):
        out.print("  " + line)
    job = ""
    for i, ((model, strategy, nodes, restore), row) in enumerate(needs.items()):
        n = _needs(row)
        if i == limit:
            out.print(f"  … {len(needs) - limit} more (plan --json has every point's answer)")
            break
        if _job(n) != job:
            job = _job(n)
            out.print(f"  job: {job}")
        out.print(f"  {model}, {strategy}, {nodes} node(s), restore {restore}: checkpoint "
                  f"{format_bytes(n.nominal_checkpoint_bytes)}, a restore reads "
                  f"{format_bytes(n.restore_storage_bytes)} from storage")
        for line in _answer_lines(strategy, n):
            out.print("    " + line)


def _needs(row: PlanRow) -> TrainingNeeds:
    """A runnable measure row's inverse answer (the summary keeps no other)."""
    assert row.needs is not None, row.point_id
    return row.needs


def _input_lines(row: PlanRow) -> list[str]:
    """The model's inputs the sweep fixes, and what is projected from what."""
    n = _needs(row)
    restart = (f"restart (relaunch before the restore) {n.restart_s:g} s (training.restart_s)"
               if n.restart_s_given else "restart (relaunch before the restore) 0 s assumed: training.restart_s "
               "is not set and nothing is measured yet (the report uses the launch time measured for each point)")
    scaled = "" if row.scale >= 1 or row.sized is None else \
        f"; the points write {row.scale:g} of it ({format_bytes(row.sized.checkpoint_bytes)} for the first)"
    return [f"inputs: {n.interval_s / 60:g} min of training between checkpoints (real step {n.step_s:g} s; "
            f"the workers' simulated step {n.simulated_step_s:g} s); {restart}",
            f"projections: full-size (nominal) checkpoint bytes{scaled}; aggregate bandwidth over the job; "
            "the checkpoint's blocking time is bytes / that bandwidth"]


def _job(n: TrainingNeeds) -> str:
    """Job nodes and failure rate, and the per-node assumption when the job is larger than the point."""
    if n.job_mtbf_s is None:
        mtbf = ("no failure figure given (training.node_mtbf_h or training.job_failures_per_day): without failures "
                "the waste is the checkpoint share alone")
    elif n.node_mtbf_h is not None:
        mtbf = f"node MTBF {n.node_mtbf_h:g} h → job MTBF {n.job_mtbf_s / 3600:.3g} h"
    else:
        mtbf = f"{n.job_failures_per_day:g} failures/day → job MTBF {n.job_mtbf_s / 3600:.3g} h"
    text = f"{n.job_nodes} node(s), {mtbf}"
    if n.job_nodes > n.point_nodes:
        text += (f"; the job's {n.job_nodes} nodes exceed the point's {n.point_nodes}: the per-node rates "
                 "are assumed to hold")
    return text


def _answer_lines(strategy: str, n: TrainingNeeds) -> list[str]:
    from studyctl.api import BLOCKS_ON, RESTORE_AT

    waste = "" if n.total_waste_at_interval is None else \
        f"; total waste then {n.total_waste_at_interval:.1%}"
    lines = [f"at the {n.interval_s / 60:g} min interval: {n.required_blocking_GiBps:.2f} GiB/s "
             f"{BLOCKS_ON[strategy]} keeps checkpoints at {n.checkpoint_share_at_interval:.1%}{waste}"]
    if n.required_blocking_GiBps_at_optimum is not None and n.optimum_interval_s is not None:
        lines.append(f"at the optimum: {n.required_blocking_GiBps_at_optimum:.2f} GiB/s keeps total waste at "
                     f"{n.total_waste_at_optimum:.1%} (Daly's interval {n.optimum_interval_s / 60:.3g} min, "
                     f"checkpoints {n.checkpoint_share_at_optimum:.1%} of it); {RESTORE_AT[strategy]}")
    elif n.restart_waste_floor is not None and n.job_mtbf_s is not None:  # a floor needs a failure rate
        lines.append(f"at the optimum: not reachable: restarts alone waste {n.restart_waste_floor:.1%} "
                     f"({n.restart_s:g} s per failure, job MTBF {n.job_mtbf_s / 3600:.3g} h)")
    if n.required_background_GiBps is not None:
        lines.append(f"the background drain needs {n.required_background_GiBps:.2f} GiB/s of shared storage "
                     "(the whole checkpoint within the interval)")
    return lines
