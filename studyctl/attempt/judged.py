"""Which points are judged: one rule for collect, compare and the MLPerf view.

A point the study's current sweep copy excludes (an exclude rule, or a layout that cannot exist) is not
judged anywhere, even where a result from before the exclusion is still on disk. A point studyctl added itself
(a ceiling, a calibration run) is judged while its resource shape is measured: while the sweep copy has a
runnable measure point of that shape, whether or not the point is still one the sweep adds (a ceiling or
calibration run superseded by a change of the measure points still measured its shape). Without a readable
sweep copy (a study directory handed over without it) every point is judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from studyctl.attempt.paths import StudyPaths
from studyctl.definition.planning.expand import iter_points
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError


@dataclass(frozen=True)
class Judged:
    excluded: frozenset[str] = frozenset()  # point ids the sweep copy excludes
    shapes: frozenset[str] | None = None  # `Shape.key`s its runnable measure points have (None: no readable copy)

    def added_judged(self, shape_key: str) -> bool:
        """Whether a point studyctl added of this shape is judged."""
        return self.shapes is None or shape_key in self.shapes


def judged(paths: StudyPaths) -> Judged:
    """What the sweep copy judges; nothing excluded when there is no readable copy."""
    if not paths.sweep_copy.is_file():
        return Judged()
    excluded, shapes = set(), set()
    try:
        for pp in iter_points(load_sweep(paths.sweep_copy)):
            if pp.excluded:
                excluded.add(pp.point.point_id)
            else:
                shapes.add(shape_of(pp.point).key)
    except UserError:
        return Judged()
    return Judged(frozenset(excluded), frozenset(shapes))


def excluded_points(paths: StudyPaths) -> frozenset[str]:
    """Point ids the sweep copy excludes; empty when there is no readable copy."""
    return judged(paths).excluded
