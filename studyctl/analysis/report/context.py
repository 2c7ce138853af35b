"""What the report shows, as plain values: a function of the tables, the declared plots and the statuses."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

import studyctl
from studyctl.analysis.adequacy import not_a_cold_read
from studyctl.analysis.cells import DERIVED, IDENTITY, independent, varying, with_fallbacks_shown
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.plots import Plot
from studyctl.analysis.report.costs import cost_section
from studyctl.analysis.report.coverage import coverage
from studyctl.analysis.report.engines import engine_section
from studyctl.analysis.report.hardware import hardware_section
from studyctl.analysis.report.recovery import recovery_section
from studyctl.analysis.report.sections import declared_tables, topic_tables
from studyctl.analysis.status import PointStatus
from studyctl.analysis.tables import HEADLINE, Tables
from studyctl.analysis.values import missing
from studyctl.units import format_bytes

PHASE_ORDER = {"write": 0, "read": 1}


def plot_entries(plots: Sequence[Plot], base: Path) -> list[dict[str, str]]:
    return [{"src": Path(os.path.relpath(p.path, base)).as_posix(), "title": p.title, "kind": p.kind}
            for p in plots]


def summary_records(summary: pd.DataFrame, axes: list[str]) -> list[dict[str, Any]]:
    if summary.empty:
        return []
    order = summary.assign(_phase=summary["phase"].map(PHASE_ORDER))
    keys = [a for a in axes if a != "nodes"] + ["_phase", "nodes"]
    order = order.sort_values(keys, key=lambda s: s.astype(str) if s.dtype == object else s)
    return order.drop(columns="_phase").to_dict("records")


def settings(summary: pd.DataFrame) -> list[tuple[str, str]]:
    """Every setting of the study: its one value, or the values it takes (an axis)."""
    rows = []
    for col in IDENTITY:
        if col not in summary:
            continue
        values = sorted({str(v) for v in summary[col].tolist() if not missing(v)})
        if values:
            rows.append((col, ", ".join(values)))
    return rows


def fixed_settings(summary: pd.DataFrame) -> list[tuple[str, str]]:
    """The settings that do not vary: one value in every cell (`cells.varying` is the one rule of varying;
    what ran, io_mode_used or cold_read_method, varies like any setting even where the settings decide it)."""
    moving = set(varying(summary))
    return [(col, value) for col, value in settings(summary) if col not in moving]


def _best(summary: pd.DataFrame, rows: pd.DataFrame) -> str | None:
    """The fastest of `rows` (cells of `summary`), with its CI, its settings that vary and its flags."""
    if rows.empty or rows[HEADLINE].isna().all():
        return None
    r = rows.loc[rows[HEADLINE].idxmax()]
    ci = r[f"{HEADLINE}_ci95"]
    band = f" [{r[f'{HEADLINE}_ci95_low']:.2f}, {r[f'{HEADLINE}_ci95_high']:.2f}] 95% CI" if not missing(ci) \
        else " (no CI: one repetition)"
    shown = with_fallbacks_shown(summary)
    axes = independent(shown, varying(shown, ("phase", *DERIVED)))
    where = describe_cell(shown.loc[r.name].to_dict(), axes) if len(summary) > 1 else ""
    flags = f" — flags: {r['flags']}" if r.get("flags") else ""
    return f"{r[HEADLINE]:.2f} GiB/s{band}, n = {int(r['n'])} — {where}{flags}"


def _sizes_by_model(summary: pd.DataFrame, col: str) -> str:
    """"llama_7b 87.86 GiB; llama3-8b 104.70 GiB" (distinct sizes as shown; ZeRO stages may differ)."""
    parts = []
    for model, g in summary.groupby("model", sort=True):
        shown = list(dict.fromkeys(format_bytes(v) for v in sorted(g[col].dropna())))
        parts.append(f"{model} {', '.join(shown[:4])}{' …' if len(shown) > 4 else ''}")
    return "; ".join(parts)


def overview(tables: Tables) -> list[tuple[str, str]]:
    """Facts about what was measured, for the report's opening: sizes, scale, repetitions, best figures."""
    pts, summary = tables.points, tables.summary
    if pts.empty:
        return []
    rows = []
    scales = sorted({float(s) for s in pts["scale"].dropna()}) if "scale" in pts else []
    if scales:
        rows.append(("scale", ", ".join(f"{s:g}" for s in scales)
                     + ("" if scales == [1.0] else " (every tensor shrunk; files, ranks and layout kept)")))
    for col, title in (("nominal_checkpoint_bytes", "checkpoint size, nominal (full size)"),
                       ("bytes", "checkpoint size, written")):
        if col in summary:
            rows.append((title, _sizes_by_model(summary, col)))
    n = summary["n"]
    rows.append(("repetitions per cell", f"{int(n.min())}–{int(n.max())}" if n.min() != n.max() else str(int(n.min()))))
    rows.append(("checkpoints per point", ", ".join(str(v) for v in sorted(set(pts["checkpoints"])))))
    return rows + best_figures(summary)


def best_figures(summary: pd.DataFrame) -> list[tuple[str, str]]:
    """Best write; best cold read, apart from a faster read that was not cold (warm, a memory tier, DLIO):
    that one is named for what it is, never as the study's best read."""
    rows = []
    writes, reads = summary[summary["phase"] == "write"], summary[summary["phase"] == "read"]
    best = _best(summary, writes)
    if best:
        rows.append(("best write (total bytes / total time)", best))
    not_cold = reads["flags"].map(not_a_cold_read) if "flags" in reads else pd.Series(False, index=reads.index)
    best = _best(summary, reads[~not_cold])
    if best:
        rows.append(("best cold read (total bytes / total time)", best))
    faster = reads[not_cold]
    if not faster.empty and (reads[~not_cold].empty or faster[HEADLINE].max() > reads.loc[~not_cold, HEADLINE].max()):
        rows.append(("fastest read, not cold (not a storage read: see flags)", str(_best(summary, faster))))
    return rows


def provenance(infos: Sequence[dict[str, Any]]) -> tuple[list[tuple[str, list[str]]], list[dict[str, Any]]]:
    """(key, distinct values) rows, and one record per filesystem with its mount details."""
    keys = [("studyctl", "studyctl (worker)"), ("python", "Python"), ("mpi4py", "mpi4py"),
            ("mpi_library", "MPI library"), ("kernel", "kernel"), ("cluster", "Slurm cluster"),
            ("partition", "Slurm partition"),
            ("memory_return", "host memory handed back to a hypervisor (calls that take fresh memory vary with it)")]
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


def fallbacks(tables: Tables) -> list[str]:
    """One line per point that fell back from direct to buffered I/O, with the worker's reason."""
    return [f"{pid}: {info['direct_fallback_reason']}" for pid, info in sorted(tables.infos.items())
            if info.get("direct_fallback_reason")]


def build_context(study_dir: Path, study: str, description: str | None, tables: Tables, plots: Sequence[Plot],
                  skipped_plots: Sequence[str], statuses: Sequence[PointStatus] | None,
                  table_paths: Sequence[Path], extras: dict[str, Any]) -> dict[str, Any]:
    """Everything the templates read; `extras`: ratio tables and imported DLIO runs."""
    cov = coverage(study, tables, statuses)
    prov, filesystems = provenance(list(tables.infos.values()))
    summary = with_fallbacks_shown(tables.summary)
    # a column per varying setting; one that the others determine (what ran, a zipped axis) adds no row identity
    axes = independent(summary, varying(summary, ("phase", *DERIVED))) if not summary.empty else []
    records = summary_records(summary, axes)
    titles = {a: "ZeRO" if a == "zero_stage" else a for a in axes}
    context = {
        "study": study, "description": description, "version": studyctl.__version__,
        "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "axes": axes, "axis_titles": titles,
        "summary": records, "hardware": hardware_section(tables, records), "engines": engine_section(tables.summary),
        "settings": settings(summary) if not summary.empty else [],
        "fixed_settings": fixed_settings(summary) if not summary.empty else [],
        "left_out": list(tables.left_out),
        "plots": plot_entries(plots, study_dir), "skipped_plots": list(skipped_plots), "coverage": cov,
        "excluded_reasons": Counter(r.reason for r in cov["excluded"]).most_common(),
        "problems": list(tables.problems), "provenance": prov, "filesystems": filesystems,
        "tables": sorted({t.name for t in table_paths if t.suffix == ".csv"}),
        "ledger": statuses is not None, "overview": overview(tables), "n_points": len(tables.infos),
        "fallbacks": fallbacks(tables), "ratios": extras.get("ratios", []), "dlio_runs": extras.get("dlio_runs", []),
        "training": cost_section(tables), "recovery": recovery_section(tables),
        # cells on an object store: their requests per checkpoint (tables.REQUEST_COLUMNS, means over checkpoints)
        "requests": [r for r in records if not missing(r.get("requests_put"))],
        "topic_sections": topic_tables(tables, axes, titles),
    }
    return {**context, "t": declared_tables(context)}
