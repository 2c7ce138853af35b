"""What `collect` makes when its inputs changed: tables, plots, ratios and the report, as one `CollectResult`.

Kept apart from `collect` so that a collect with nothing new never imports what this needs (pandas,
matplotlib, pyarrow, jinja2, the result schema).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from studyctl.analysis.collect_result import CollectResult, state_counts
from studyctl.analysis.dlio.importer import import_runs
from studyctl.analysis.figures import BASE_PLOTS
from studyctl.analysis.findings import Problem
from studyctl.analysis.forked import Children, forking, in_child
from studyctl.analysis.hardware.ceiling_gaps import ceilings_setting
from studyctl.analysis.hardware.table import share_lines
from studyctl.analysis.output_memo import OutputMemo, recording
from studyctl.analysis.outputs import declared
from studyctl.analysis.plots import Plot
from studyctl.analysis.ratios import RatioSpec, parse_ratio, ratio_table
from studyctl.analysis.report import render_report
from studyctl.analysis.status import PointStatus
from studyctl.analysis.tables import Tables, build_tables, table_files, write_frame, write_tables
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.tree import AttemptFiles
from studyctl.definition.inputs.yamlpos import load_yaml_bounded
from studyctl.errors import UserError
from studyctl.states import State

PLOT_MEMO, TABLE_MEMO = "plots.json", "tables.json"  # under tables/.cache: what each output was made from


def _description(paths: StudyPaths) -> str | None:
    """The sweep's description, if the study directory keeps a copy of the sweep (optional)."""
    try:
        data = load_yaml_bounded(paths.sweep_copy)
    except UserError:
        return None  # missing or damaged: the report goes without a description
    text = data.get("description") if isinstance(data, dict) else None
    return str(text) if text else None


def _missing_results(tables: Tables, statuses: Sequence[PointStatus] | None) -> list[Problem]:
    """Points the statuses call COMPLETED with no usable result file."""
    if statuses is None:
        return []
    have = set(tables.infos) | {p.point_id for p in tables.problems}
    return [Problem(s.point_id, s.attempts or None, "", "ledger says COMPLETED but there is no result file")
            for s in statuses if s.state == State.COMPLETED.value and s.point_id not in have]


def _remove_stale_plots(plots_dir: Path, keep: list[Plot]) -> None:
    """PNGs of plots this collect did not draw (a model since removed); never another writer's temporary
    file, never anything but a regular file. `plots_dir` is a real directory of the study (`owned_dir`)."""
    keep_names = {p.path.name for p in keep}
    for entry in os.scandir(plots_dir):
        if (entry.name.endswith(".png") and not entry.name.startswith(".") and entry.name not in keep_names
                and entry.is_file(follow_symlinks=False)):
            Path(entry.path).unlink(missing_ok=True)


def _ratio_outputs(tables: Tables, specs: list[RatioSpec], paths: StudyPaths
                   ) -> tuple[dict[str, list[Path]], list[Plot], list[dict[str, Any]]]:
    from studyctl.analysis.plots.forest import forest

    written: dict[str, list[Path]] = {}
    plots: list[Plot] = []
    sections = []
    for spec in specs:
        table = ratio_table(tables.summary, spec)
        written[spec.name] = write_frame(table, paths.tables, spec.name)
        title = f"{spec.axis}: each value / {spec.baseline}, every other setting equal (95% CI)"
        if not table.empty:
            rows = table.assign(label=table["cell"].where(table["cell"] != "all points", "")
                                .radd(table[spec.axis] + " / " + spec.baseline + " "))
            plots.append(Plot("ratio", title, forest(rows, title, f"ratio to {spec.axis} = {spec.baseline}",
                                                     paths.plots / f"{spec.name}.png")))
        sections.append({"title": title, "axis": spec.axis, "baseline": spec.baseline,
                         "rows": table.to_dict("records")})
    return written, plots, sections


def _draw(tables: Tables, out_dir: Path, children: Children | None) -> tuple[dict[str, list[Plot]], list[str]]:
    """Every declared set of plots (the summary's, then each topic's), by name, and the plots skipped and why. The
    summary's figures (most of them) start rendering in children once built, while the topics' are built here."""
    drawn: dict[str, list[Plot]] = {}
    skipped: list[str] = []
    for out in declared("PLOTS", BASE_PLOTS):
        drawn[out.name], why = out.draw(tables, out_dir)
        skipped += why
        if children is not None and out.name == BASE_PLOTS[0].name:
            children.start()
    return drawn, skipped


def make_outputs(paths: StudyPaths, found: dict[str, list[AttemptFiles]], statuses: Sequence[PointStatus] | None,
                 dlio: list[Path], ratios: list[str], force: bool, dlio_reads: str) -> CollectResult:
    """Every output of the study made again (or kept by the output memos where its data is the same)."""
    extra, runs, dlio_problems = import_runs(dlio, reads=dlio_reads) if dlio else (None, [], [])
    excluded = frozenset(s.point_id for s in statuses or () if s.excluded)
    frame_writes: list[Callable[[], None]] = []  # the kept per-point frames, written beside the tables
    tables = build_tables(paths.root, extra, paths.tables_cache, excluded, found, frame_writes)
    specs = [parse_ratio(text, tables.summary) for text in ratios]  # refused before anything is written
    tables.problems.extend([*_missing_results(tables, statuses), *dlio_problems])
    table_memo = OutputMemo(paths.tables_cache / TABLE_MEMO, paths.tables, forget=force)
    plot_memo = OutputMemo(paths.tables_cache / PLOT_MEMO, paths.plots, forget=force)
    # The tables are written by a forked child while the figures are built here; each figure's rendering is queued
    # for more children (`forked`), started once the summary's figures are built and again once every figure is,
    # while this process builds the topics' figures and makes the report (which reads no PNG and no table file).
    def write_all() -> None:
        write_tables(tables, paths, table_memo)
        for write in frame_writes:
            write()

    with recording(plot_memo), forking() as children:
        in_child(paths.tables, write_all, lambda: None)
        if children is not None:
            children.start()  # the tables are written while the figures are built
        plot_sets, skipped = _draw(tables, paths.plots, children)
        ratio_files, plot_sets["ratios"], sections = _ratio_outputs(tables, specs, paths)
        if children is not None:
            children.start()
        written = table_files(paths)
        plots = [p for drawn in plot_sets.values() for p in drawn]
        _remove_stale_plots(paths.plots, plots)  # a child's file is renamed into place under its plot's name
        html, md = render_report(paths, _description(paths), tables, plots, skipped, statuses,
                                 [p for files in written.values() for p in files],
                                 {"ratios": sections, "dlio_runs": [asdict(r) for r in runs]})
    completed, failed = state_counts(statuses)
    ratio_lines = [f"{r['label']} — {r['cell']}" for s in sections for r in s["rows"]]
    measured = sum(1 for i in tables.infos.values() if i.get("role", "measure") == "measure")
    return CollectResult(paths.name, paths.root, False, measured, len(tables.summary), completed, failed,
                         {**written, **ratio_files}, plot_sets, skipped, ratio_lines, html, md, tables.problems,
                         tables.failures, tables.files_read, tables.files_cached, tables.left_out,
                         share_lines(tables.summary, tables.ceilings, statuses, ceilings_setting(paths.sweep_copy)))
