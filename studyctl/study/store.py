"""Where a study lives and what it was planned from: finding it, its sweep, its points in the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.backends.base import backend_class
from studyctl.definition.checkpoint.objects import sweep_targets
from studyctl.definition.planning.expand import PlannedPoint, expand, measure_points
from studyctl.definition.planning.fit_added import within_capacity
from studyctl.definition.planning.sweep import SweepFile, load_sweep
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text
from studyctl.objstore import trust
from studyctl.study.ledger import Ledger
from studyctl.study.same_study import check_same_study, is_recorded


def find_study(study: str | Path, results: Path = Path("results")) -> StudyPaths:
    """STUDY is a study directory or a study name under `results`."""
    for candidate in (Path(study), results / str(study)):
        paths = StudyPaths(candidate.absolute())
        if paths.is_study():
            return paths
    raise UserError(f"no study {str(study)!r}: neither a study directory nor a name under {results}/ "
                    "(run 'studyctl sweep submit SWEEP.yaml' first)")


def load_given_sweep(path: Path) -> SweepFile:
    """The sweep file the user gave this command (`plan`, `submit`): its object stores are the user's own, so
    this command may send them the user's credentials (`objstore.trust`); a study's own copy is never that."""
    sweep = load_sweep(path)
    trust.given(sweep_targets(sweep.filesystems))
    return sweep


def load_current_sweep(paths: StudyPaths, ledger: Ledger, update_copy: bool = False,
                       notes: list[str] | None = None) -> SweepFile:
    """The sweep file the study came from if it is still this study (it may have been fixed, or widened), else
    the study's recorded copy.

    "Still this study" is exactly submit's check (`same_study`): the same name, and every recorded point
    still in it. An edit that drops or changes points, renames the study or breaks the file is another study:
    the recorded copy is used and `notes` says why, so a rerun never pools two sweeps or loses a point.
    `update_copy`: the study is about to run from it, so it becomes the study's recorded sweep.
    """
    source = ledger.meta("source_path")
    if source and Path(source).is_file():
        try:
            return _adopt(paths, Path(source), update_copy)
        except (UserError, OSError, UnicodeDecodeError) as exc:
            if notes is not None:
                notes.append(f"{source} is not this study's sweep any more ({exc}); ran from the study's "
                             f"recorded sweep {paths.sweep_copy}")
    return load_sweep(paths.sweep_copy)


def _adopt(paths: StudyPaths, source: Path, update_copy: bool) -> SweepFile:
    text = source.read_text()
    sweep = load_sweep(source)
    if sweep.study != paths.name:
        raise UserError(f"it names study {sweep.study!r}")
    if not is_recorded(paths, text):  # the common case (the file as submitted) needs no expansion
        check_same_study(paths, expand(sweep), text)
    if update_copy:
        atomic_write_text(paths.sweep_copy, text)
    return sweep


def sync_points(ledger: Ledger, planned: Sequence[PlannedPoint]) -> int:
    """Record the sweep's points (new ones, order, exclusions); returns how many were new."""
    return ledger.sync_points(
        (pp.point.point_id, pp.order, pp.point.canonical(), pp.excluded, pp.exclude_reason) for pp in planned
    )


def planned_to_run(sweep: SweepFile, backend: str, notes: list[str]) -> list[PlannedPoint]:
    """The sweep's points as they run on `backend`, the one list every command records in the ledger: calibration
    within the free space of its filesystem, and the points studyctl adds that would still not fit there left out
    (a line each into `notes`), so only a measure point can refuse the study (`submit.refuse_up_front`)."""
    cls = backend_class(backend)
    return list(within_capacity(sweep, measure_points(sweep), cls.capacity(sweep),
                                lambda p: cls.point_time_limit_s(sweep, p), notes))
