"""Which points are judged: one rule for collect, compare and the MLPerf view.

A point the study's current sweep copy excludes (an exclude rule, or a layout that cannot exist) is not
judged anywhere, even where a result from before the exclusion is still on disk. Without a readable sweep
copy (a study directory handed over without it) no point is known to be excluded.
"""

from __future__ import annotations

from studyctl.attempt.paths import StudyPaths
from studyctl.definition.expand import iter_points
from studyctl.definition.sweep import load_sweep
from studyctl.errors import UserError


def excluded_points(paths: StudyPaths) -> frozenset[str]:
    """Point ids the sweep copy excludes; empty when there is no readable copy."""
    if not paths.sweep_copy.is_file():
        return frozenset()
    try:
        sweep = load_sweep(paths.sweep_copy)
        return frozenset(pp.point.point_id for pp in iter_points(sweep) if pp.excluded)
    except UserError:
        return frozenset()
