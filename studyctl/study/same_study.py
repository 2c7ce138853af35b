"""A study name in a results directory names one study: another sweep under it is refused.

Two sweeps are the same study when the new one's matrix still expands to every measure point the recorded
one's (results/<study>/sweep.yaml) expands to, excluded points included: resubmitting, adding exclusions,
widening an axis (more node counts, block sizes, repetitions, models) keep the study. A sweep that drops
or changes measure points (another model, scale, filesystem name, any setting of the old points) is another
study: `collect` would pool the two. Dropping points from a study is done with `exclude:`, which keeps
them in the expansion. Point ids hash every measured setting and nothing else, so comments, key order,
`local:`/`slurm:` options and filesystem paths may change freely.

The points studyctl adds itself (ceilings, calibration: `definition.planning.auxiliary`) never decide it: they derive
from the measure points, so any change of those adds, keeps or supersedes some of them. A superseded one leaves
the sweep (the ledger's in_sweep), is never run again, and its completed result still serves the shape it
measured while that shape is measured (`attempt.judged`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from studyctl.attempt.paths import StudyPaths
from studyctl.definition.planning.expand import PlannedPoint, iter_points
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError


def is_recorded(paths: StudyPaths, text: str) -> bool:
    """True when there is no recorded sweep yet, or `text` is it to the byte: the same study, nothing to expand."""
    try:
        return not paths.sweep_copy.is_file() or paths.sweep_copy.read_text() == text
    except (OSError, UnicodeDecodeError):
        return False  # unreadable: check_same_study's load_sweep says why


def check_same_study(paths: StudyPaths, planned: Sequence[PlannedPoint], text: str) -> None:
    """UserError (exit 2) when `planned` (from the sweep `text`) is not the study recorded under `paths`."""
    if is_recorded(paths, text):
        return
    recorded = paths.sweep_copy
    advice = "use another study name or --results"
    try:
        old = {pp.point.point_id for pp in iter_points(load_sweep(recorded))}
    except UserError as exc:
        raise UserError(f"study {paths.name}: its recorded sweep {recorded} cannot be read ({exc}), so this "
                        f"sweep cannot be checked against it; {advice}") from None
    missing = old - {pp.point.point_id for pp in planned if pp.point.role == "measure"}
    if missing:
        raise UserError(f"study {paths.name} in {paths.root.parent} was submitted from a different sweep "
                        f"({recorded}): {len(missing)} of its {len(old)} measured points are not in this one; "
                        f"{advice} (to drop points of the same study, exclude them)")


@contextmanager
def checked_same_study(paths: StudyPaths, planned: Sequence[PlannedPoint], text: str) -> Iterator[None]:
    """`check_same_study` as a step of a `with` (after the study lock, before the ledger opens)."""
    check_same_study(paths, planned, text)
    yield
