"""`collect`: a study's result files (and statuses handed in) → tables, plots, ratios and a report.

A function of the files: it never reads the ledger, polls a scheduler or deletes results. Work is
skipped when nothing it depends on changed (a manifest under tables/.cache): that check scans the attempt
tree once and imports none of the analysis stack (pandas, matplotlib, pydantic's models), which
`collect_outputs` loads when there is work. Bad input (a ratio
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import studyctl
from studyctl.analysis.collect_result import CollectResult, from_manifest, state_counts, to_manifest
from studyctl.analysis.findings import Failure, Problem
from studyctl.analysis.result_cache import CACHE_VERSION
from studyctl.analysis.status import PointStatus
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.tree import ERROR_NAME, RESULT_NAME, AttemptFiles, scan_attempts, stamp_stat
from studyctl.fsutil import atomic_write_json, owned_dir

if TYPE_CHECKING:
    from studyctl.analysis.dlio.importer import DlioRun
    from studyctl.analysis.tables import Tables, build_tables

__all__ = ["CollectResult", "DlioRun", "Failure", "PointStatus", "Problem", "Tables", "build_tables", "collect"]
MANIFEST_VERSION = 7  # 4: filesystem and object store request plots; 5: why ceilings are missing; 6: by declared name;
# 7: paths relative to the study folder


def __getattr__(name: str) -> Any:
    """`DlioRun`, `Tables` and `build_tables`, imported when first asked for (they load the analysis stack)."""
    if name == "DlioRun":
        from studyctl.analysis.dlio.importer import DlioRun
        return DlioRun
    if name in ("Tables", "build_tables"):
        from studyctl.analysis import tables
        return getattr(tables, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _file_stamps(found: dict[str, list[AttemptFiles]]) -> list[str]:
    """"point/attempt/file/mtime/size" per result and error file the tree scan found, from the scan's own lstat
    where the file is not a symlink (10,000 points: one stat each saved)."""
    out: list[str] = []
    for pid in sorted(found):
        for a in found[pid]:
            for path, name, scanned in ((a.result_file, RESULT_NAME, a.result_lstat),
                                        (a.error_file, ERROR_NAME, a.error_lstat)):
                if path is None or (st := stamp_stat(path, scanned)) is None:
                    continue
                out.append(f"{pid}/{a.attempt}/{name}/{st.st_mtime_ns}/{st.st_size}\n")
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


def _load_manifest(paths: StudyPaths, stamp: str, statuses: Sequence[PointStatus] | None) -> CollectResult | None:
    """The last collect's result, if its inputs were these (`stamp`) and every file it wrote is still there."""
    try:
        manifest = json.loads(paths.outputs_manifest.read_text())
        if manifest.get("stamp") != stamp:
            return None
        result = from_manifest(paths, manifest)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing, damaged or of another shape: made again
    if not all(os.path.exists(p) for p in result.output_files()):
        return None
    result.completed, result.failed = state_counts(statuses)
    return result


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
    found = scan_attempts(paths)
    stamp = _fingerprint(paths, found, statuses, dlio, [*ratios, f"dlio_reads={dlio_reads}"])
    kept = None if force else _load_manifest(paths, stamp, statuses)
    if kept is not None:
        return kept
    from studyctl.analysis.collect_outputs import make_outputs  # the analysis stack: only when work is redone

    result = make_outputs(paths, found, statuses, dlio, list(ratios), force, dlio_reads)
    atomic_write_json(paths.outputs_manifest, {"stamp": stamp, **to_manifest(result)})
    return result

