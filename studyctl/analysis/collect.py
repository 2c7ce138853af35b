"""`collect`: a study's result files (and statuses handed in) → tables, plots, ratios and a report.

A function of the files: it never reads the ledger, polls a scheduler or deletes results. Work is
skipped when nothing it depends on changed (a manifest under tables/.cache). Bad input (a ratio
naming no axis, a DLIO path with no summary.json) is refused before anything is written, and so is a
study whose tables/, tables/.cache/ or plots/ is a symlink (`fsutil.owned_dir`); a damaged or implausible
DLIO folder is a problem naming its file, like a damaged result file, and the rest is kept. Every file is
replaced atomically under a fresh temporary name, so collects of one study may run at the same time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import studyctl
from studyctl.analysis.ceiling_gaps import ceilings_setting
from studyctl.analysis.dlio_import import DlioRun, import_runs
from studyctl.analysis.hardware import share_lines
from studyctl.analysis.output_memo import OutputMemo, recording
from studyctl.analysis.plots import Plot, make_plots, training_plots
from studyctl.analysis.plots.recovery import recovery_plots
from studyctl.analysis.ratios import RatioSpec, parse_ratio, ratio_table
from studyctl.analysis.report import render_report
from studyctl.analysis.result_cache import CACHE_VERSION
from studyctl.analysis.results import Failure, Problem
from studyctl.analysis.status import PointStatus
from studyctl.analysis.tables import Tables, build_tables, write_frame, write_tables
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.tree import AttemptFiles, scan_attempts
from studyctl.definition.yamlpos import load_yaml_bounded
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_json, owned_dir
from studyctl.states import NOT_FAILED, State

__all__ = ["CollectResult", "DlioRun", "Failure", "PointStatus", "Problem", "Tables", "build_tables", "collect"]
MANIFEST_VERSION = 5  # 4: filesystem and object store request plots; 5: why ceilings are missing
PLOT_MEMO, TABLE_MEMO = "plots.json", "tables.json"  # under tables/.cache: what each output was made from


@dataclass
class CollectResult:
    """What a collect produced and found; `unchanged` when nothing was redone."""

    study: str
    study_dir: Path
    unchanged: bool
    points: int = 0  # measure points with a valid result in the tables (ceiling and calibration points apart)
    cells: int = 0  # summary rows (cell × phase)
    completed: int | None = None  # from the statuses handed in (None: no statuses)
    failed: int | None = None
    tables: list[Path] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    skipped_plots: list[str] = field(default_factory=list)
    ratios: list[str] = field(default_factory=list)  # one line per ratio, e.g. "direct / buffered write: 1.70× [..]"
    report_html: Path | None = None
    report_md: Path | None = None
    problems: list[Problem] = field(default_factory=list)  # invalid, truncated or missing results
    failures: list[Failure] = field(default_factory=list)  # worker error records (error.json)
    files_read: int = 0  # result files parsed and validated this time
    files_cached: int = 0  # result files taken from the parse cache
    # results of points the sweep now excludes, or that studyctl added for a shape it no longer measures: not cells
    left_out: list[str] = field(default_factory=list)
    hardware: list[str] = field(default_factory=list)  # per cell × phase: its share of the ceiling and its limit

    @property
    def tables_dir(self) -> Path:
        return StudyPaths(self.study_dir).tables

    def summary_lines(self) -> list[str]:
        """Plain lines for the CLI."""
        how = (" (nothing new since the last collect)" if self.unchanged else
               f"; validated {self.files_read} result files, {self.files_cached} unchanged from cache")
        states = "" if self.completed is None else f"{self.completed} completed, {self.failed} failed; "
        lines = [f"study {self.study}: {states}{self.points} points collected into {self.cells} cell×phase "
                 f"rows{how}"]
        lines += [f"  unusable result: {p.point_id}: {p.reason}" if p.attempt is None else
                  f"  unusable result: point {p.point_id} attempt {p.attempt}: {p.reason}" for p in self.problems]
        lines += [f"  worker error: point {f.point_id} attempt {f.attempt}: {f.failure_class}: {f.reason}"
                  for f in self.failures]
        if self.left_out:
            lines.append(f"  left out: {len(self.left_out)} result(s) of points the sweep now excludes (or added "
                         "for a shape it no longer measures)")
        if self.failed:
            lines.append(f"  rerun the failed points: studyctl sweep resubmit {self.study}")
        lines += [f"  plot skipped: {s}" for s in self.skipped_plots]
        lines += [f"ratio: {r}" for r in self.ratios]
        lines += [f"hardware: {h}" for h in self.hardware]
        lines.append(f"tables: {self.tables_dir}")
        lines += [f"plot: {p.path}" for p in self.plots]
        lines.append(f"report: {self.report_html}")
        lines.append(f"report (Markdown): {self.report_md}")
        return lines


def _file_stamps(found: dict[str, list[AttemptFiles]]) -> list[str]:
    """"point/attempt/file/mtime/size" per result and error file the tree scan found (10k points: ~0.2 s)."""
    out: list[str] = []
    for pid in sorted(found):
        for a in found[pid]:
            for path in (p for p in (a.result, a.error) if p is not None):
                try:
                    st = os.stat(path)
                except OSError:  # a dangling link: its own stamp
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                out.append(f"{pid}/{a.attempt}/{path.name}/{st.st_mtime_ns}/{st.st_size}\n")
    return out


def _dlio_stamps(run: Path) -> str:
    """Every JSON file of a DLIO folder, by name, mtime and size (lstat: a dangling link is a stamp too)."""
    stamps = []
    for p in sorted(run.glob("*.json")):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        stamps.append(f"{p.name}/{st.st_mtime_ns}/{st.st_size}\n")
    return "".join(stamps)


def _fingerprint(paths: StudyPaths, found: dict[str, list[AttemptFiles]], statuses: Sequence[PointStatus] | None,
                 dlio: Sequence[Path], ratios: Sequence[str]) -> str:
    """Everything the outputs depend on: result/error files, statuses, DLIO input, ratios, code version."""
    h = hashlib.sha256(f"{studyctl.__version__}/{CACHE_VERSION}/{MANIFEST_VERSION}\n".encode())
    h.update("".join(_file_stamps(found)).encode())
    h.update(repr(sorted(statuses, key=lambda s: s.point_id) if statuses is not None else None).encode())
    h.update(repr(list(ratios)).encode())
    for run in dlio:
        h.update(str(run.resolve()).encode())
        h.update(_dlio_stamps(run).encode())
    if paths.sweep_copy.exists():
        h.update(f"sweep/{paths.sweep_copy.stat().st_mtime_ns}".encode())
    return h.hexdigest()


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


def _state_counts(statuses: Sequence[PointStatus] | None) -> tuple[int | None, int | None]:
    if statuses is None:
        return None, None
    return (sum(1 for s in statuses if s.state == State.COMPLETED.value and not s.excluded),
            sum(1 for s in statuses if s.state not in NOT_FAILED and not s.excluded))


def _load_manifest(path: Path, stamp: str) -> dict[str, Any] | None:
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("stamp") != stamp:
        return None
    outputs = [manifest["report_html"], manifest["report_md"], *manifest["tables"],
               *(p["path"] for p in manifest["plots"])]
    return manifest if all(os.path.exists(p) for p in outputs) else None


def _from_manifest(paths: StudyPaths, m: dict[str, Any], statuses: Sequence[PointStatus] | None) -> CollectResult:
    completed, failed = _state_counts(statuses)
    return CollectResult(paths.name, paths.root, True, m["points"], m["cells"], completed, failed,
                         [Path(p) for p in m["tables"]],
                         [Plot(p["kind"], p["title"], Path(p["path"])) for p in m["plots"]], m["skipped_plots"],
                         m["ratios"], Path(m["report_html"]), Path(m["report_md"]),
                         [Problem(**p) for p in m["problems"]], [Failure(**f) for f in m["failures"]], 0, m["files"],
                         m["left_out"], m["hardware"])


def _save_manifest(path: Path, stamp: str, r: CollectResult) -> None:
    atomic_write_json(path, {
        "stamp": stamp, "points": r.points, "cells": r.cells, "tables": [str(p) for p in r.tables],
        "plots": [{"kind": p.kind, "title": p.title, "path": str(p.path)} for p in r.plots],
        "skipped_plots": r.skipped_plots, "ratios": r.ratios, "report_html": str(r.report_html),
        "report_md": str(r.report_md), "problems": [asdict(p) for p in r.problems],
        "failures": [asdict(f) for f in r.failures], "files": r.files_read + r.files_cached,
        "left_out": r.left_out, "hardware": r.hardware})


def _remove_stale_plots(plots_dir: Path, keep: list[Plot]) -> None:
    """PNGs of plots this collect did not draw (a model since removed); never another writer's temporary
    file, never anything but a regular file. `plots_dir` is a real directory of the study (`owned_dir`)."""
    keep_names = {p.path.name for p in keep}
    for entry in os.scandir(plots_dir):
        if (entry.name.endswith(".png") and not entry.name.startswith(".") and entry.name not in keep_names
                and entry.is_file(follow_symlinks=False)):
            Path(entry.path).unlink(missing_ok=True)


def _ratio_outputs(tables: Tables, specs: list[RatioSpec], paths: StudyPaths
                   ) -> tuple[list[Path], list[Plot], list[dict[str, Any]]]:
    from studyctl.analysis.plots.forest import forest

    written, plots, sections = [], [], []
    for spec in specs:
        table = ratio_table(tables.summary, spec)
        written += write_frame(table, paths.tables, spec.name)
        title = f"{spec.axis}: each value / {spec.baseline}, every other setting equal (95% CI)"
        if not table.empty:
            rows = table.assign(label=table["cell"].where(table["cell"] != "all points", "")
                                .radd(table[spec.axis] + " / " + spec.baseline + " "))
            plots.append(Plot("ratio", title, forest(rows, title, f"ratio to {spec.axis} = {spec.baseline}",
                                                     paths.plots / f"{spec.name}.png")))
        sections.append({"title": title, "axis": spec.axis, "baseline": spec.baseline,
                         "rows": table.to_dict("records")})
    return written, plots, sections


def collect(study_dir: Path, statuses: Sequence[PointStatus] | None = None,
            import_dlio: Sequence[Path] | Path | None = None, *, ratios: Sequence[str] = (),
            force: bool = False, dlio_reads: str = "warm") -> CollectResult:
    """Tables (CSV + Parquet), plots (PNG), ratios and report (HTML + Markdown) for `results/<study>/`.

    `statuses` (the ledger's view, handed in) feed the report's coverage section; without them the
    report says what the files alone show. Invalid results are listed in `problems`, never fatal.
    """
    paths = StudyPaths(Path(study_dir))
    dlio = [Path(p) for p in ([import_dlio] if isinstance(import_dlio, (str, Path)) else import_dlio or [])]
    for out_dir in paths.collect_dirs:  # refused before anything is read or written through a symlink
        owned_dir(paths.root, out_dir)
    manifest_path = paths.outputs_manifest
    found = scan_attempts(paths)
    stamp = _fingerprint(paths, found, statuses, dlio, [*ratios, f"dlio_reads={dlio_reads}"])
    manifest = None if force else _load_manifest(manifest_path, stamp)
    if manifest is not None:
        return _from_manifest(paths, manifest, statuses)
    extra, runs, dlio_problems = import_runs(dlio, reads=dlio_reads) if dlio else (None, [], [])
    excluded = frozenset(s.point_id for s in statuses or () if s.excluded)
    tables = build_tables(paths.root, extra, paths.tables_cache, excluded, found)
    specs = [parse_ratio(text, tables.summary) for text in ratios]  # refused before anything is written
    tables.problems.extend([*_missing_results(tables, statuses), *dlio_problems])
    table_memo = OutputMemo(paths.tables_cache / TABLE_MEMO, paths.tables, forget=force)
    plot_memo = OutputMemo(paths.tables_cache / PLOT_MEMO, paths.plots, forget=force)
    with ThreadPoolExecutor(1) as pool, recording(plot_memo):  # pyarrow writes tables without the GIL while plots draw
        writing = pool.submit(write_tables, tables, paths, table_memo)
        plots, skipped = make_plots(tables.summary, tables.ranks, paths.plots)
        more, why = training_plots(tables.training_cells, paths.plots)
        plots, skipped = plots + more, skipped + why
        more, why = recovery_plots(tables.recovery_cells, paths.plots)
        plots, skipped = plots + more, skipped + why
        ratio_files, ratio_plots, sections = _ratio_outputs(tables, specs, paths)
        plots += ratio_plots
        written = writing.result()
    _remove_stale_plots(paths.plots, plots)
    html, md = render_report(paths, _description(paths), tables, plots, skipped, statuses, written,
                             {"ratios": sections, "dlio_runs": [asdict(r) for r in runs]})
    completed, failed = _state_counts(statuses)
    ratio_lines = [f"{r['label']} — {r['cell']}" for s in sections for r in s["rows"]]
    measured = sum(1 for i in tables.infos.values() if i.get("role", "measure") == "measure")
    result = CollectResult(paths.name, paths.root, False, measured, len(tables.summary), completed, failed,
                           written + ratio_files, plots, skipped, ratio_lines, html, md, tables.problems,
                           tables.failures, tables.files_read, tables.files_cached, tables.left_out,
                           share_lines(tables.summary, tables.ceilings, statuses, ceilings_setting(paths.sweep_copy)))
    _save_manifest(manifest_path, stamp, result)
    return result

