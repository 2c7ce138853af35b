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
from studyctl.collect import Problem
from studyctl.fsutil import atomic_write_text


@dataclass(frozen=True)
class PointStatus:
    """What the report says about one point (filled from the ledger by the caller)."""

    point_id: str
    state: str  # a State value, or "EXCLUDED"
    attempts: int
    label: str  # short config: "llama_7b ZeRO-1 2×4 lustre buffered rep 0"
    reason: str | None = None  # failure or exclusion reason


def template_dir() -> Path:
    """Templates ship inside the wheel as studyctl/templates; in a checkout they are ./templates."""
    packaged = resources.files("studyctl") / "templates"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[1] / "templates"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(template_dir()),
                             autoescape=jinja2.select_autoescape(["html", "html.j2"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.globals.update(fmt=_fmt, pct=_pct, size=_size)
    return env


def _fmt(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _pct(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 100:.0f}%"


def _size(n: Any) -> str:
    n = float(n)
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


PLOT_TITLES = {"bandwidth": "Aggregate bandwidth vs nodes (95% CI; dotted: ideal scaling)",
               "duration": "Time to checkpoint vs nodes (slowest rank)", "efficiency": "Scaling efficiency",
               "rank_spread": "Per-rank bandwidth spread", "io_mode": "I/O mode comparison"}


def _plot_entries(plots: Sequence[Path], base: Path) -> list[dict[str, str]]:
    out = []
    for p in plots:
        kind, _, model = p.stem.partition("_")
        if p.stem in ("rank_spread", "io_mode"):
            kind, model = p.stem, ""
        title = PLOT_TITLES.get(kind, p.stem) + (f": {model}" if model else "")
        out.append({"src": os.path.relpath(p, base), "title": title})
    return out


def _coverage(statuses: Sequence[PointStatus]) -> dict[str, list[PointStatus]]:
    cov: dict[str, list[PointStatus]] = {"completed": [], "failed": [], "excluded": [], "other": []}
    for s in statuses:
        if s.state == "COMPLETED":
            cov["completed"].append(s)
        elif s.state == "EXCLUDED":
            cov["excluded"].append(s)
        elif s.state in ("FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "LOST"):
            cov["failed"].append(s)
        else:
            cov["other"].append(s)
    return cov


def _provenance(infos: Sequence[dict[str, Any]]) -> tuple[list[tuple[str, list[str]]], list[dict[str, Any]]]:
    keys = [("python", "Python"), ("mpi4py", "mpi4py"), ("mpi_library", "MPI library"), ("kernel", "kernel"),
            ("studyctl", "studyctl (worker)"), ("cluster", "Slurm cluster")]
    rows = []
    for key, title in keys:
        values = sorted({str(i[key]) for i in infos if i.get(key)})
        if values:
            rows.append((title, values))
    if infos:
        rows.append(("nodes simulated on one host", sorted({str(i["simulated_nodes"]) for i in infos})))
        rows.append(("measured", [min(i["started_at"] for i in infos) + " → " + max(i["finished_at"] for i in infos)]))
    seen: dict[str, dict[str, Any]] = {}
    for i in infos:
        seen.setdefault(i["filesystem"], i)
    return rows, list(seen.values())


def render_report(out_dir: Path, study: str, description: str | None, summary: pd.DataFrame, plots: Sequence[Path],
                  skipped_plots: Sequence[str], statuses: Sequence[PointStatus], problems: Sequence[Problem],
                  infos: Sequence[dict[str, Any]], tables: Sequence[Path]) -> tuple[Path, Path]:
    env = _env()
    coverage = _coverage(statuses)
    provenance, filesystems = _provenance(infos)
    context = {
        "study": study, "description": description, "version": studyctl.__version__,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "summary": summary.sort_values(["model", "phase", "zero_stage", "filesystem", "io_mode", "nodes"],
                                       ascending=[True, False, True, True, True, True]).to_dict("records")
        if not summary.empty else [],
        "plots": _plot_entries(plots, out_dir), "skipped_plots": list(skipped_plots), "coverage": coverage,
        "excluded_reasons": Counter(s.reason or "excluded" for s in coverage["excluded"]).most_common(),
        "problems": list(problems), "provenance": provenance, "filesystems": filesystems,
        "tables": sorted({t.name for t in tables if t.suffix == ".csv"}),
    }
    html = out_dir / "report.html"
    md = out_dir / "report.md"
    atomic_write_text(html, env.get_template("report.html.j2").render(**context))
    atomic_write_text(md, env.get_template("report.md.j2").render(**context))
    return html, md
