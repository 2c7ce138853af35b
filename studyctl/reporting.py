"""`collect` and `compare` for a study directory: ledger states + result files → tables, plots, report."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from studyctl.collect import Problem, build_tables, find_result_files, write_tables
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text
from studyctl.plots import make_plots
from studyctl.report import PointStatus, render_report
from studyctl.study import StudyDir, find_study


@dataclass
class CollectOutcome:
    study: StudyDir
    unchanged: bool
    completed: int = 0
    failed: int = 0
    problems: list[Problem] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)
    report_html: Path | None = None
    report_md: Path | None = None
    files_read: int = 0
    files_cached: int = 0

    def summary_lines(self) -> list[str]:
        root = self.study.root
        lines = [f"study {self.study.name}: {self.completed} completed, {self.failed} failed"
                 + (" (nothing new since the last collect)" if self.unchanged else
                    f"; read {self.files_read} result files, {self.files_cached} from cache")]
        for p in self.problems:
            lines.append(f"  invalid result: point {p.point_id} attempt {p.attempt}: {p.reason}")
        if self.failed:
            lines.append(f"  rerun the failed points: studyctl sweep resubmit {self.study.name}")
        lines.append(f"tables: {root / 'tables'}")
        lines += [f"plot: {p}" for p in self.plots]
        lines.append(f"report: {self.report_html}")
        lines.append(f"report (Markdown): {self.report_md}")
        return lines


def point_statuses(study: StudyDir) -> tuple[list[PointStatus], str | None]:
    """The ledger's view of every point, for the report's coverage section."""
    from studyctl import study as study_mod

    rep = study_mod.status(study.root)
    statuses = []
    for p in rep.points:
        cfg = p.config
        label = (f"{cfg['model']['name']} ZeRO-{cfg['zero_stage']} TP{cfg['tensor_parallel']}×PP"
                 f"{cfg['pipeline_parallel']} {cfg['nodes']}×{cfg['ranks_per_node']} {cfg['filesystem']} "
                 f"{cfg['io_mode']} rep {cfg['repetition']}")
        if p.excluded:
            statuses.append(PointStatus(p.point_id, "EXCLUDED", p.attempts, label, p.exclude_reason))
        else:
            statuses.append(PointStatus(p.point_id, p.state.value, p.attempts, label,
                                        p.latest.reason if p.latest else None))
    description = None
    try:
        import yaml

        description = (yaml.safe_load(study.sweep_copy.read_text()) or {}).get("description")
    except (OSError, ValueError, AttributeError):
        pass
    return statuses, description


def _fingerprint(study: StudyDir, statuses: list[PointStatus], import_dlio: Path | None) -> str:
    h = hashlib.sha256()
    for point_id, attempts in sorted(find_result_files(study.root).items()):
        for attempt, path in sorted(attempts):
            st = path.stat()
            h.update(f"{point_id}/{attempt}/{st.st_mtime_ns}/{st.st_size}\n".encode())
    for s in statuses:
        h.update(f"{s.point_id}:{s.state}:{s.attempts}:{s.reason}\n".encode())
    h.update(str(import_dlio).encode())
    return h.hexdigest()


def collect_study(study_ref: str | Path, results: Path = Path("results"), import_dlio: Path | None = None,
                  force: bool = False) -> CollectOutcome:
    study = find_study(study_ref, results)
    statuses, description = point_statuses(study)
    failed = sum(1 for s in statuses if s.state not in ("COMPLETED", "EXCLUDED", "PLANNED", "SUBMITTED", "PENDING",
                                                         "RUNNING"))
    completed = sum(1 for s in statuses if s.state == "COMPLETED")
    stamp_path = study.root / "tables" / ".cache" / "fingerprint"
    html, md = study.root / "report.html", study.root / "report.md"
    stamp = _fingerprint(study, statuses, import_dlio)
    if not force and html.exists() and stamp_path.exists() and stamp_path.read_text() == stamp:
        manifest = json.loads((study.root / "tables" / ".cache" / "outputs.json").read_text())
        return CollectOutcome(study, True, completed, failed, [Problem(**p) for p in manifest["problems"]],
                              [Path(p) for p in manifest["tables"]], [Path(p) for p in manifest["plots"]], html, md)
    extra = None
    if import_dlio is not None:
        from studyctl.dlio_import import import_dlio as load_dlio

        extra = load_dlio(import_dlio)
    tables = build_tables(study.root, extra)
    written = write_tables(tables, study.root / "tables")
    plots, skipped = make_plots(tables.summary, tables.ranks, study.root / "plots")
    html, md = render_report(study.root, study.name, description, tables.summary, plots, skipped, statuses,
                             tables.problems, list(tables.results.values()), written)
    atomic_write_text(study.root / "tables" / ".cache" / "outputs.json", json.dumps(
        {"tables": [str(p) for p in written], "plots": [str(p) for p in plots],
         "problems": [p.__dict__ for p in tables.problems]}))
    atomic_write_text(stamp_path, stamp)
    return CollectOutcome(study, False, completed, failed, tables.problems, written, plots, html, md,
                          tables.files_read, tables.files_cached)


def parse_threshold(text: str) -> float:
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UserError(f"--threshold: {text!r} is not a fraction or a percentage (e.g. 5% or 0.05)") from None
    if not 0 <= value < 1:
        raise UserError(f"--threshold: {text!r} must be between 0% and 100%")
    return value


def compare_studies(a: str | Path, b: str | Path, results: Path = Path("results"), threshold: str = "5%"):
    from studyctl.compare import compare

    limit = parse_threshold(threshold)
    sa, sb = find_study(a, results), find_study(b, results)
    return compare(sa.root, sb.root, limit)
