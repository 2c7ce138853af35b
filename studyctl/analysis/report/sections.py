"""The report's base tables, declared once (`analysis.section`): the summary by cell and the object store's
requests, and `declared_tables`, which fills every declared table for one report from its context."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from functools import cache
from typing import Any

import studyctl.analysis
from studyctl.analysis.dlio.section import DLIO_RUNS, run_rows
from studyctl.analysis.hardware.section import HARDWARE, SHAPES
from studyctl.analysis.recovery.section import RECOVERY
from studyctl.analysis.report.coverage import EXCLUDED_REASONS, FAILED_POINTS, UNUSABLE
from studyctl.analysis.report.engines import ENGINES
from studyctl.analysis.section import Column, Declared, Section, Table, fmt, pct, table, value
from studyctl.analysis.training.section import TRAINING


def _efficiency(r: dict[str, Any]) -> str:
    caveat = r.get("scaling_efficiency_caveat")
    return pct(r["scaling_efficiency"]) + (f" ({caveat})" if isinstance(caveat, str) else "")


def _short(x: float) -> str:
    return ("%.3g" if x < 100 else "%.0f") % x


def _projected(r: dict[str, Any]) -> str:
    """"12.3 [10.1, 15.2] fit ≤ scale 0.01" from a fit; "12.3 plain" from bytes over bandwidth; "–"."""
    text = fmt(r["projected_full_size_s"], 1)
    if fmt(r["projected_full_size_s_lo"], 1) != "–":
        return (f"{text} [{_short(r['projected_full_size_s_lo'])}, {_short(r['projected_full_size_s_hi'])}]"
                f" fit ≤ scale {value(r['projection_scale_max'])}")
    return text + (" plain" if text != "–" else "")


def _flags(r: dict[str, Any]) -> str:
    extra = r.get("projection_flag")
    joined = ("; " if r["flags"] else "") + extra if isinstance(extra, str) and extra else ""
    return f"{r['flags']}{joined}"


SUMMARY = Section("summary", (
    Column("phase", "phase", "text", align="left"),
    Column("n", "n"),
    Column("GiB/s\nbytes / time", "bytes_over_time_GiBps", "fmt", strong="html"),
    Column("± 95% CI", "bytes_over_time_GiBps_ci95", "fmt"),
    Column("GiB/s\nmean of rates", "mean_of_rates_GiBps", "fmt"),
    Column("time (s)", "duration_s_mean", "fmt"),
    Column("± 95% CI", "duration_s_ci95", "fmt"),
    Column("GiB/s\nper node", "per_node_GiBps", "fmt"),
    Column("effi\u00adciency", _efficiency, "text"),
    Column("written", "bytes", "size"),
    Column("nominal", "nominal_checkpoint_bytes", "size"),
    Column("projected\nfull-size (s)", _projected),
    Column("flags", _flags, "text", align="left", css="flags", bad_when="flags"),
), axes=True, wide=True, empty="no completed results")

REQUESTS = Section("requests", (
    Column("phase", "phase", "text", align="left"),
    Column("GiB/s", "bytes_over_time_GiBps", "fmt"),
    *(Column(header, f"requests_{key}", "fmt", digits=0) for header, key in (
        ("PUT", "put"), ("part", "part"), ("GET", "get"), ("HEAD", "head"), ("LIST", "list"),
        ("DELETE", "delete"), ("retries", "retries"), ("throttled", "throttled"))),
    Column("first byte (s)", "first_byte_s_max", "fmt"),
), axes=True, wide=True)


def declared_tables(context: dict[str, Any]) -> dict[str, Table]:
    """Every declared table of the report, filled from its context, by section id."""
    axes, titles = context["axes"], context["axis_titles"]
    hardware, training, recovery = context["hardware"], context["training"], context["recovery"]
    return {
        "summary": table(SUMMARY, context["summary"], axes, titles),
        "engines": table(ENGINES, context["engines"]["rows"]),
        "hardware": table(HARDWARE, hardware["rows"], axes, titles, peaks=bool(hardware["peaks"])),
        "shapes": table(SHAPES, hardware.get("shapes") or []),
        "requests": table(REQUESTS, context["requests"], axes, titles),
        "training": table(TRAINING, training["rows"], training["axes"], staged=bool(training["staged"])),
        "recovery": table(RECOVERY, recovery["rows"], recovery["axes"]),
        "dlio": table(DLIO_RUNS, run_rows(context["dlio_runs"])),
        "failed": table(FAILED_POINTS, context["coverage"]["failed"]),
        "problems": table(UNUSABLE, context["problems"]),
        "excluded": table(EXCLUDED_REASONS, context["excluded_reasons"]),
    }


@cache
def topic_declarations() -> tuple[Declared, ...]:
    """Every `REPORT_SECTIONS` a topic package's `section` module declares, in topic order: a topic adds a
    report section in its own files, and both templates draw it with no edit."""
    found: list[Declared] = []
    for info in sorted(pkgutil.iter_modules(studyctl.analysis.__path__), key=lambda i: i.name):
        if info.ispkg and importlib.util.find_spec(f"studyctl.analysis.{info.name}.section"):
            module = importlib.import_module(f"studyctl.analysis.{info.name}.section")
            found.extend(getattr(module, "REPORT_SECTIONS", ()))
    return tuple(found)


def topic_tables(tables: Any, axes: list[str], titles: dict[str, str]) -> list[Table]:
    """The topics' own sections for this study, those with rows."""
    filled = [table(d.section, d.rows(tables), axes, titles) for d in topic_declarations()]
    return [t for t in filled if t.rows]
