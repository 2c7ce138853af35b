"""The MLPerf Storage view on disk: results/<study>/mlperf.html and mlperf.md from the rules' verdicts."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import jinja2

from studyctl.analysis.mlperf import MLPERF_READS, MLPERF_WRITES, PAGE_CACHE_FACTOR, ModelVerdict, mlperf_view
from studyctl.analysis.report.markdown import template_env
from studyctl.attempt.judged import excluded_points
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.result_file import read_result
from studyctl.attempt.tree import file_status, scan_attempts
from studyctl.definition.catalog import MLPERF_SHAPES
from studyctl.definition.result_schema import Result
from studyctl.fsutil import atomic_write_text
from studyctl.host import mount_of

DEFINITIONS = [
    ("GB", "10^9 bytes (MLPerf's unit; studyctl's own tables use GiB = 2^30 B)"),
    ("duration", "of one checkpoint write or read: the maximum over processes of each process's own time"),
    ("throughput", "of one checkpoint: the minimum over processes of checkpoint size / that process's time, "
                   "i.e. checkpoint size / duration; shown as the mean over the point's checkpoints"),
    ("procedure", f"{MLPERF_WRITES} checkpoint writes, then {MLPERF_READS} reads, each file fsynced"),
    ("page cache", f"cleared between writing and reading unless a node wrote at least {PAGE_CACHE_FACTOR}× its "
                   "memory (MLPerf: two invocations with drop_caches between)"),
]


def _env() -> jinja2.Environment:
    return template_env()  # the report's: HTML autoescaped, Markdown through its escaping filters


def _num(x: float | None, digits: int = 4) -> str:
    """Significant digits, so a scaled-down point's 0.0107 GB is not shown as 0.000."""
    return "-" if x is None else f"{x:.{digits}g}"


def write_mlperf_report(study: str, out_dir: Path, verdicts: list[ModelVerdict]) -> tuple[Path, Path]:
    """Render both files atomically; returns (html, md)."""
    env = _env()
    env.globals["num"] = _num
    context = {
        "study": study,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "verdicts": verdicts,
        "definitions": DEFINITIONS,
        "shapes": [(name, *shape) for name, shape in MLPERF_SHAPES.items()],
    }
    html, md = StudyPaths(out_dir).mlperf_html, StudyPaths(out_dir).mlperf_md
    atomic_write_text(html, env.get_template("mlperf.html.j2").render(**context))
    atomic_write_text(md, env.get_template("mlperf.md.j2").render(**context))
    return html, md


def load_results(study_dir: Path) -> list[Result]:
    """Per judged point its newest usable result: what collect tabulates, by the same reader and rules
    (unusable files are collect's to report; points the sweep copy excludes are not judged)."""
    paths = StudyPaths(study_dir)
    excluded = excluded_points(paths)
    chosen = []
    for point_id, attempts in scan_attempts(paths).items():
        if point_id in excluded:
            continue
        for a in attempts:
            if a.result is None or file_status(a.result, paths)[0] is None:  # a FIFO or device is never opened
                continue
            result, _ = read_result(a.result, point_id, a.attempt)
            if result is not None:
                chosen.append(result)
                break
    return sorted(chosen, key=lambda r: (r.point.model.name, r.point.world_size, r.point_id))


def mlperf_for_study(study_dir: Path, study: str) -> tuple[list[ModelVerdict], Path, Path]:
    """Judge every result of the study against MLPerf's rules and write the view beside its report."""
    results_mount = mount_of(str(study_dir))["mount_point"]
    verdicts = mlperf_view(load_results(study_dir), results_mount)
    html, md = write_mlperf_report(study, study_dir, verdicts)
    return verdicts, html, md
