"""The HTML and Markdown report (jinja2): a function of the tables, the plots and the point states."""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

import studyctl
from studyctl.analysis.tables import Failure, Problem, Tables
from studyctl.fsutil import atomic_write_text
from studyctl.states import EXCLUDED
from studyctl.units import format_bytes

FAILED_STATES = frozenset({"FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                           "LOST"})


@dataclass(frozen=True)
class PointStatus:
    """The ledger's view of one point, for the coverage section (the caller fills it from the ledger)."""

    point_id: str
    state: str  # a studyctl.states.State value, or "EXCLUDED"
    attempts: int = 0
    failure_reason: str | None = None  # latest attempt's reason, for failed states
    excluded_reason: str | None = None  # set for points the planner excluded
    resubmit_command: str | None = None  # default: studyctl sweep resubmit <study> --point <id>
    label: str = ""  # short config, e.g. "llama_7b ZeRO-1 2×4 lustre buffered rep 0"

    @property
    def excluded(self) -> bool:
        return self.state == EXCLUDED or self.excluded_reason is not None


@dataclass(frozen=True)
class CoverageRow:
    point_id: str
    state: str
    attempts: int
    label: str
    reason: str
    command: str


def template_dir() -> Path:
    """Templates ship inside the wheel as studyctl/templates; in a checkout they are ./templates."""
    package = Path(str(resources.files("studyctl")))
    packaged = package / "templates"
    return packaged if packaged.is_dir() else package.parent / "templates"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(template_dir()),
                             autoescape=jinja2.select_autoescape(["html", "html.j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(fmt=_fmt, pct=_pct, size=_size)
    env.filters["md"] = _md_cell
    return env


def _missing(x: Any) -> bool:
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def _fmt(x: Any, digits: int = 3) -> str:
    return "–" if _missing(x) else f"{x:.{digits}f}"


def _pct(x: Any) -> str:
    return "–" if _missing(x) else f"{x * 100:.0f}%"


def _size(n: Any) -> str:
    return "–" if _missing(n) else format_bytes(n)


def _md_cell(x: Any) -> str:
    """Markdown table cells: no pipes or newlines from user text."""
    return str(x).replace("|", "/").replace("\n", " ")


PLOT_TITLES = {"bandwidth": "Aggregate bandwidth vs nodes (95% CI; dotted: ideal scaling)",
               "duration": "Time to checkpoint vs nodes (slowest rank, 95% CI)",
               "efficiency": "Scaling efficiency (per-node bandwidth vs the smallest node count)",
               "rank_spread": "Per-rank bandwidth spread (stragglers)",
               "io_mode": "I/O mode comparison",
               "overhead": "Checkpoint overhead vs nodes per strategy (share of training time)",
               "restore_time": "Restore time per restore mode"}


def plot_entries(plots: Sequence[Path], base: Path) -> list[dict[str, str]]:
    out = []
    for p in plots:
        kind, _, model = p.stem.partition("_")
        if p.stem in PLOT_TITLES:
            kind, model = p.stem, ""
        title = PLOT_TITLES.get(kind, p.stem) + (f": {model}" if model else "")
        out.append({"src": Path(os.path.relpath(p, base)).as_posix(), "title": title})
    return out


def resubmit_command(study: str, point_id: str) -> str:
    return f"studyctl sweep resubmit {study} --point {point_id}"


def coverage(study: str, tables: Tables,
             statuses: Sequence[PointStatus] | None) -> dict[str, list[CoverageRow]]:
    """completed / failed / excluded / other rows; from the ledger's statuses, else from the files alone."""
    cov: dict[str, list[CoverageRow]] = {"completed": [], "failed": [], "excluded": [], "other": []}
    labels = _labels(tables)
    worker_errors = {f.point_id: f for f in tables.failures}
    if statuses is None:  # no ledger view: what the files say
        for pid in sorted(tables.infos):
            cov["completed"].append(CoverageRow(pid, "COMPLETED", tables.infos[pid]["attempt"],
                                                labels.get(pid, ""), "", ""))
        invalid = {p.point_id: p for p in tables.problems}
        for pid in sorted((set(worker_errors) | set(invalid)) - set(tables.infos)):
            cov["failed"].append(_failed_from_files(study, pid, worker_errors.get(pid), invalid.get(pid)))
        return cov
    for s in statuses:
        label = s.label or labels.get(s.point_id, "")
        if s.excluded:
            cov["excluded"].append(CoverageRow(s.point_id, EXCLUDED, s.attempts, label,
                                               s.excluded_reason or "excluded", ""))
        elif s.state == "COMPLETED":
            cov["completed"].append(CoverageRow(s.point_id, s.state, s.attempts, label, "", ""))
        elif s.state in FAILED_STATES:
            f = worker_errors.get(s.point_id)
            reason = s.failure_reason or (f"{f.failure_class}: {f.reason}" if f else "no reason recorded")
            cov["failed"].append(CoverageRow(s.point_id, s.state, s.attempts, label, reason,
                                             s.resubmit_command or resubmit_command(study, s.point_id)))
        else:
            cov["other"].append(CoverageRow(s.point_id, s.state, s.attempts, label, "", ""))
    return cov


def _failed_from_files(study: str, pid: str, error: Failure | None, problem: Problem | None) -> CoverageRow:
    if error is not None:
        return CoverageRow(pid, "FAILED", error.attempt, "", f"{error.failure_class}: {error.reason}",
                           resubmit_command(study, pid))
    assert problem is not None
    return CoverageRow(pid, "FAILED", problem.attempt or 0, "", f"invalid result: {problem.reason}",
                       resubmit_command(study, pid))


def _labels(tables: Tables) -> dict[str, str]:
    pts = tables.points
    if pts.empty or "point_id" not in pts:
        return {}
    first = pts.drop_duplicates("point_id")
    return {r.point_id: f"{r.model} ZeRO-{r.zero_stage} TP{r.tensor_parallel}×PP{r.pipeline_parallel} "
                        f"{r.nodes}×{r.ranks_per_node} {r.filesystem} {r.io_mode} rep {r.repetition}"
            for r in first.itertuples() if r.tool == "studyctl"}


def provenance(infos: Sequence[dict[str, Any]]) -> tuple[list[tuple[str, list[str]]], list[dict[str, Any]]]:
    """(key, distinct values) rows, and one record per filesystem with its mount details."""
    keys = [("studyctl", "studyctl (worker)"), ("python", "Python"), ("mpi4py", "mpi4py"),
            ("mpi_library", "MPI library"), ("kernel", "kernel"), ("cluster", "Slurm cluster"),
            ("partition", "Slurm partition")]
    rows = []
    for key, title in keys:
        values = sorted({str(i[key]) for i in infos if i.get(key)})
        if values:
            rows.append((title, values[:8] + ([f"… {len(values) - 8} more"] if len(values) > 8 else [])))
    if infos:
        rows.append(("nodes simulated on one host", sorted({"yes" if i["simulated_nodes"] else "no"
                                                             for i in infos})))
        rows.append(("measured (UTC)", [min(i["started_at"] for i in infos) + " → "
                                        + max(i["finished_at"] for i in infos)]))
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for i in infos:
        seen.setdefault((i["filesystem"], i["mount_options"]), i)
    return rows, sorted(seen.values(), key=lambda i: i["filesystem"])


def _summary_records(summary: pd.DataFrame) -> list[dict[str, Any]]:
    if summary.empty:
        return []
    order = summary.assign(_phase=summary["phase"].map({"write": 0, "read": 1}))
    order = order.sort_values(["tool", "model", "_phase", "zero_stage", "filesystem", "io_mode", "nodes"])
    return order.drop(columns="_phase").to_dict("records")


def study_overview(tables: Tables) -> list[tuple[str, str]]:
    """One-line facts about what was measured, for the report's opening."""
    pts, summary = tables.points, tables.summary
    if pts.empty:
        return []

    def values(col: str) -> str:
        return ", ".join(str(v) for v in sorted(pts[col].dropna().unique(), key=str)) if col in pts else "–"

    nodes = sorted(int(n) for n in pts["nodes"].unique())
    rows = [("models", values("model")), ("filesystems", values("filesystem")),
            ("I/O modes", values("io_mode")), ("ZeRO stages", values("zero_stage")),
            ("nodes", ", ".join(map(str, nodes))), ("ranks per node", values("ranks_per_node")),
            ("phases", ", ".join(p for p in ("write", "read") if p in set(pts["phase"]))),
            ("repetitions per cell", f"{int(summary['n'].min())}–{int(summary['n'].max())}"
             if summary["n"].min() != summary["n"].max() else str(int(summary["n"].min()))),
            ("checkpoints per point", values("checkpoints"))]
    if "tool" in pts and pts["tool"].nunique() > 1:
        rows.append(("tools", values("tool")))
    for phase in ("write", "read"):
        best = summary[summary["phase"] == phase]
        if not best.empty:
            r = best.loc[best["aggregate_GiBps_mean"].idxmax()]
            rows.append((f"best {phase}", f"{r['aggregate_GiBps_mean']:.2f} GiB/s — {r['model']} ZeRO-"
                                          f"{r['zero_stage']} on {r['nodes']} nodes, {r['filesystem']}, "
                                          f"{r['io_mode']}"))
    return rows


def render_report(study_dir: Path, study: str, description: str | None, tables: Tables, plots: Sequence[Path],
                  skipped_plots: Sequence[str], statuses: Sequence[PointStatus] | None,
                  table_paths: Sequence[Path]) -> tuple[Path, Path]:
    """report.html and report.md in the study directory (plot paths relative to it)."""
    cov = coverage(study, tables, statuses)
    prov, filesystems = provenance(list(tables.infos.values()))
    context = {
        "study": study, "description": description, "version": studyctl.__version__,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "summary": _summary_records(tables.summary), "plots": plot_entries(plots, study_dir),
        "skipped_plots": list(skipped_plots), "coverage": cov,
        "excluded_reasons": Counter(r.reason for r in cov["excluded"]).most_common(),
        "problems": list(tables.problems), "provenance": prov, "filesystems": filesystems,
        "tools": sorted(set(tables.summary["tool"])) if not tables.summary.empty else [],
        "tables": sorted({t.name for t in table_paths if t.suffix == ".csv"}),
        "ledger": statuses is not None, "overview": study_overview(tables),
        "n_points": len(tables.infos),
    }
    env = _env()
    html, md = study_dir / "report.html", study_dir / "report.md"
    atomic_write_text(html, env.get_template("report.html.j2").render(**context))
    atomic_write_text(md, env.get_template("report.md.j2").render(**context))
    return html, md
