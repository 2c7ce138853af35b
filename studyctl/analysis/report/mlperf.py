"""The MLPerf Storage view on disk: results/<study>/mlperf.html and mlperf.md from the verdicts of one rule set,
and on request the v3.0-shaped results tree (`mlperf.tree`)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2

from studyctl.analysis.mlperf.rules import DEFAULT_RULES, RuleSet, rule_set
from studyctl.analysis.mlperf.tree import write_tree
from studyctl.analysis.mlperf.view import ModelVerdict, Where, mlperf_view
from studyctl.analysis.report.markdown import template_env
from studyctl.attempt.judged import excluded_points
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.result_file import read_result
from studyctl.attempt.tree import file_status, scan_attempts
from studyctl.definition.inputs.catalog import MLPERF_SHAPES
from studyctl.definition.inputs.yamlpos import load_yaml_bounded
from studyctl.definition.result.result_schema import Result
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text
from studyctl.host import mount_of


def definitions(rules: RuleSet) -> list[tuple[str, str]]:
    """The terms the view uses, with the figures taken from the rule set's own rows."""
    params = {r.check: r.params for r in rules.rules}
    writes, reads, factor = params["procedure"]["writes"], params["procedure"]["reads"], params["page_cache"]["factor"]
    return [
        ("GB", "10^9 bytes (MLPerf's unit; studyctl's own tables use GiB = 2^30 B)"),
        ("duration", "of one checkpoint write or read: the maximum over processes of each process's own time"),
        ("throughput", "of one checkpoint: the minimum over processes of checkpoint size / that process's time, "
                       "i.e. checkpoint size / duration; shown as the mean over the point's checkpoints"),
        ("procedure", f"{writes} checkpoint writes, then {reads} reads, each file fsynced"),
        ("page cache", f"cleared between writing and reading unless a node wrote at least {factor}× its memory "
                       "(MLPerf: two invocations with drop_caches between); object reads have no client cache"),
        ("unknown", "a rule studyctl cannot judge from its results (e.g. the accelerator type it does not simulate)"),
    ]


def _env() -> jinja2.Environment:
    return template_env()  # the report's: HTML autoescaped, Markdown through its escaping filters


def _num(x: float | None, digits: int = 4) -> str:
    """Significant digits, so a scaled-down point's 0.0107 GB is not shown as 0.000."""
    return "-" if x is None else f"{x:.{digits}g}"


def write_mlperf_report(study: str, out_dir: Path, verdicts: list[ModelVerdict], rules: RuleSet
                        ) -> tuple[Path, Path]:
    """Render both files atomically; returns (html, md)."""
    env = _env()
    env.globals["num"] = _num
    context = {
        "study": study,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "verdicts": verdicts,
        "rules": rules,
        "definitions": definitions(rules),
        "shapes": [(name, *shape) for name, shape in MLPERF_SHAPES.items()],
        "not_judged": rules.not_judged,
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


def sweep_filesystems(paths: StudyPaths) -> dict[str, dict[str, Any]]:
    """filesystem name → its spec (kind, path, endpoint, ...) from the study's sweep copy; {} without a readable
    copy. Only scalar entries are kept (the copy is data, like every file in a results directory)."""
    try:
        data = load_yaml_bounded(paths.sweep_copy)
    except UserError:
        return {}
    found = data.get("filesystems") if isinstance(data, dict) else None
    return {str(name): {str(k): v for k, v in spec.items() if isinstance(v, (str, int, float, bool))}
            for name, spec in (found.items() if isinstance(found, dict) else ()) if isinstance(spec, dict)}


def mlperf_for_study(study_dir: Path, study: str, rules: str = DEFAULT_RULES, out: Path | None = None
                     ) -> tuple[list[ModelVerdict], Path, Path]:
    """Judge every result of the study under one rule set and write the view beside its report; with `out`, the
    v3.0-shaped results tree there too."""
    chosen = rule_set(rules)
    where = Where(mount_of(str(study_dir))["mount_point"], sweep_filesystems(StudyPaths(study_dir)))
    verdicts = mlperf_view(load_results(study_dir), chosen, where)
    html, md = write_mlperf_report(study, study_dir, verdicts, chosen)
    if out is not None:
        write_tree(out, study, verdicts, chosen, where)
    return verdicts, html, md
