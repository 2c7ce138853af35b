"""`studyctl plan`: what each point writes, needs and costs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from studyctl.cli.common import err, guard, out, styled
from studyctl.errors import UserError
from studyctl.units import format_bytes

if TYPE_CHECKING:
    from studyctl.api import PlanSummary


def plan(
    sweep: Annotated[Path, typer.Argument(help="sweep YAML file")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per point, streamed")] = False,
    budget_node_hours: Annotated[float | None, typer.Option(min=0, help="fail if the estimate exceeds this")] = None,
    limit: Annotated[int, typer.Option(min=0, help="rows shown in the table (0: all)")] = 40,
    backend: Annotated[str, typer.Option(help="where it will run: whose free space and memory to check")] = "local",
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
                write(("\n" if i == 0 else ",\n") + json.dumps(row))
            write("\n]\n")
        else:
            rows: list[dict[str, Any]] = []
            for row in planned.rows():
                if not limit or len(rows) < limit:
                    rows.append(row)
            _print_plan(planned.sweep.study, rows, planned.summary, limit)
        from studyctl.cli.capacity import print_capacity

        problems = print_capacity(err, planned)
        planned.check_budget(budget_node_hours)
        if strict and problems:
            raise UserError(f"{len(problems)} capacity problem(s) above (--strict)", 1)

    guard(run)


def _print_plan(study: str, rows: list[dict[str, Any]], summary: PlanSummary, limit: int) -> None:
    table = Table("point", "model", "ZeRO", "TP×PP×DP", "nodes×rpn", "fs", "io", "restore", "rep", "checkpoint",
                  "max/min per rank", "files", "mem/host worker", "mem/host DLIO", "disk", "node-h",
                  title=f"study {study}", title_justify="left")
    for r in rows:
        style = "dim" if r["excluded"] else None
        if r["exclude_kind"] == "infeasible":
            sizes = [r["exclude_reason"], "", "", "", "", "", ""]
        else:
            read = r["read_bytes_per_restore"]
            sizes = [format_bytes(r["checkpoint_bytes"]) + ("" if read == r["checkpoint_bytes"]
                                                            else f", restore reads {format_bytes(read)}"),
                     f"{format_bytes(r['bytes_per_rank_max'])} / {format_bytes(r['bytes_per_rank_min'])}",
                     str(r["files_per_checkpoint"]), format_bytes(r["worker_memory_per_host_bytes"]),
                     format_bytes(r["dlio_memory_per_host_bytes"]), format_bytes(r["disk_bytes_needed"]),
                     "excluded" if r["excluded"] else f"{r['node_hours']:.3f}"]
        table.add_row(r["point_id"], r["model"], str(r["zero_stage"]),
                      f"{r['tensor_parallel']}×{r['pipeline_parallel']}×{r['data_parallel']}",
                      f"{r['nodes']}×{r['ranks_per_node']}", r["filesystem"],
                      r["io_mode"] + ("" if r["fsync"] else ", no fsync"),
                      f"{r['restore']}+{r['rank_shift']} {r['block_mib']}M {r['cold_read']}", str(r["repetition"]),
                      *sizes, style=style)
    out.print(table)
    if limit and summary.points > len(rows):
        out.print(f"… {summary.points - len(rows)} more points (--limit 0 shows all, --json for scripts)")
    out.print(styled((str(summary.points), "bold"), f" points: {summary.runnable} to run, {summary.excluded} excluded"))
    for axis, counts in summary.axis_counts.items():
        out.print(f"  {axis}: " + ", ".join(f"{k}×{v}" for k, v in counts.items()))
    for reason, n in summary.exclude_reasons.items():
        out.print(f"  excluded ×{n}: {reason}")
    out.print(f"to write {format_bytes(summary.bytes_to_write)}, to read {format_bytes(summary.bytes_to_read)}, "
              f"~{summary.node_hours:.2f} node-hours (estimate)")
    for fs, need in summary.max_disk_bytes_needed.items():
        out.print(f"  disk needed on {fs}: {format_bytes(need)} at the peak of the largest point")
    _print_needs(summary.training_needs)


def _print_needs(needs: dict[tuple[str, str, int], dict[str, Any]], limit: int = 12) -> None:
    """The inverse question: the bandwidth that keeps checkpoint overhead under the target."""
    from studyctl.api import BLOCKS_ON

    if not needs:
        return
    first = next(iter(needs.values()))
    out.print(f"to keep checkpoints under {first['target_overhead']:.0%} of training time "
              f"(checkpoint every {first['interval_s'] / 60:g} min of training; full-size checkpoints):")
    for i, ((model, strategy, nodes), n) in enumerate(needs.items()):
        if i == limit:
            out.print(f"  … {len(needs) - limit} more (plan --json has every point's answer)")
            break
        line = (f"  {model} ({format_bytes(n['nominal_checkpoint_bytes'])}), {strategy}, {nodes} node(s): "
                f"{n['required_blocking_GiBps']:.2f} GiB/s {BLOCKS_ON[strategy]}")
        if n["required_blocking_GiBps_at_optimum"] is not None:
            line += (f"; {n['required_blocking_GiBps_at_optimum']:.2f} GiB/s at the Young/Daly interval "
                     f"(job MTBF {n['job_mtbf_s'] / 3600:.1f} h)")
        if n["required_background_GiBps"] is not None:
            line += f"; the background drain needs {n['required_background_GiBps']:.2f} GiB/s of shared storage"
        out.print(line)
