"""The one library the CLI calls: plan, submit, resubmit, status, cancel, collect, compare."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from studyctl.analysis.collect import CollectResult
from studyctl.analysis.compare import CompareResult
from studyctl.analysis.status import PointStatus
from studyctl.errors import UserError
from studyctl.states import EXCLUDED
from studyctl.study.ledger import Ledger
from studyctl.study.runs import StatusReport, StudyDir, SubmitReport, cancel, find_study, resubmit, status, submit

__all__ = ["CollectResult", "CompareResult", "StatusReport", "StudyDir", "SubmitReport", "cancel", "collect",
           "compare", "find_study", "parse_threshold", "point_statuses", "resubmit", "status", "submit"]


def _label(cfg: dict) -> str:
    ckpt = cfg.get("checkpoint") or {}
    return (f"{cfg['model']['name']} ZeRO-{cfg['zero_stage']} TP{cfg['tensor_parallel']}×PP"
            f"{cfg['pipeline_parallel']} {cfg['nodes']}×{cfg['ranks_per_node']} {cfg['filesystem']} "
            f"{cfg['io_mode']} rep {cfg['repetition']}" + (f" scale {ckpt['scale']}" if ckpt.get("scale") else ""))


def point_statuses(study: StudyDir) -> list[PointStatus]:
    """Every point's state as the ledger last recorded it: read-only (no reconcile, no sacct, no deletes)."""
    with Ledger(study.ledger_path) as ledger:
        rows = ledger.points()
    out = []
    for p in rows:
        if p.excluded:
            out.append(PointStatus(p.point_id, EXCLUDED, p.attempts, excluded_reason=p.exclude_reason,
                                   label=_label(p.config)))
        else:
            out.append(PointStatus(p.point_id, p.state.value, p.attempts,
                                   failure_reason=p.latest.reason if p.latest else None, label=_label(p.config)))
    return out


def collect(study_ref: str | Path, results: Path = Path("results"), import_dlio: Sequence[Path] = (),
            ratios: Sequence[str] = (), force: bool = False) -> CollectResult:
    """Tables, plots, ratios and report of a study, with the ledger's point states as last recorded.

    States are not refreshed here (`studyctl sweep status` does that): collect never polls a scheduler.
    """
    from studyctl.analysis.collect import collect as collect_files

    study = find_study(study_ref, results)
    return collect_files(study.root, point_statuses(study), list(import_dlio), ratios=list(ratios), force=force)


def parse_threshold(text: str) -> float:
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UserError(f"--threshold: {text!r} is not a fraction or a percentage (e.g. 5% or 0.05)") from None
    if not 0 <= value < 1:
        raise UserError(f"--threshold: {text!r} must be between 0% and 100%")
    return value


def compare(study_a: str | Path, study_b: str | Path, results: Path = Path("results"),
            threshold: str = "5%") -> CompareResult:
    """B against A on the settings they share; UserError (exit 2) when nothing is comparable."""
    from studyctl.analysis.compare import compare as compare_dirs

    limit = parse_threshold(threshold)
    a, b = find_study(study_a, results), find_study(study_b, results)
    return compare_dirs(a.root, b.root, limit)
