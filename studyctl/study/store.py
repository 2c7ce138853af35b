"""Where a study lives and what it was planned from: finding it, its sweep, its points in the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.definition.expand import PlannedPoint
from studyctl.definition.sweep import SweepFile, load_sweep
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text
from studyctl.study.ledger import Ledger


def find_study(study: str | Path, results: Path = Path("results")) -> StudyPaths:
    """STUDY is a study directory or a study name under `results`."""
    for candidate in (Path(study), results / str(study)):
        paths = StudyPaths(candidate.absolute())
        if paths.is_study():
            return paths
    raise UserError(f"no study {str(study)!r}: neither a study directory nor a name under {results}/ "
                    "(run 'studyctl sweep submit SWEEP.yaml' first)")


def load_current_sweep(paths: StudyPaths, ledger: Ledger, update_copy: bool = False) -> SweepFile:
    """The sweep file the study came from if it still exists (it may have been fixed), else our copy.

    `update_copy`: the study is about to run from it, so it becomes the study's recorded sweep.
    """
    source = ledger.meta("source_path")
    if source and Path(source).is_file():
        sweep = load_sweep(Path(source))
        if sweep.study == paths.name:
            if update_copy:
                atomic_write_text(paths.sweep_copy, Path(source).read_text())
            return sweep
    return load_sweep(paths.sweep_copy)


def sync_points(ledger: Ledger, planned: Sequence[PlannedPoint]) -> int:
    """Record the sweep's points (new ones, order, exclusions); returns how many were new."""
    return ledger.sync_points(
        (pp.point.point_id, pp.order, pp.point.canonical(), pp.excluded, pp.exclude_reason) for pp in planned
    )
