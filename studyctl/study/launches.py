"""Launches of attempts: a new one writes its task.json; an existing one is read back from it."""

from __future__ import annotations

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Launch
from studyctl.backends.base import Backend
from studyctl.definition.checkpoint.points import Point, WorkerTask, data_key
from studyctl.definition.planning.sweep import SweepFile
from studyctl.fsutil import atomic_write_text
from studyctl.study.cleanup import mark
from studyctl.study.ledger import AttemptRow


def new_launch(paths: StudyPaths, sweep: SweepFile, backend: Backend, point: Point, attempt: int) -> Launch:
    """Attempt `attempt` of `point`: its directory and task.json written, its backend's time limit."""
    files = paths.attempt(point.point_id, attempt)
    files.dir.mkdir(parents=True, exist_ok=True)
    fs = sweep.filesystems[point.filesystem]
    tier = sweep.filesystems[point.checkpoint.tier] if point.checkpoint.tier else None
    task = WorkerTask(study=paths.name, point_id=point.point_id, attempt=attempt, point=point,
                      filesystem_path=fs.path, filesystem_kind=fs.kind, data_key=data_key(paths.root),
                      result_path=str(files.result), error_path=str(files.error),
                      tier_path=tier.path if tier else None, tier_kind=tier.kind if tier else None,
                      object_store=fs.object_store,
                      shared_ceilings_root=str(paths.root.parent)
                      if point.role == "ceiling" and sweep.ceilings == "shared" else None)
    atomic_write_text(files.task, task.model_dump_json(indent=1))
    mark(paths, [(point.point_id, attempt)])  # before anything can write: its data is looked for until gone
    return Launch(study=paths.name, point_id=point.point_id, attempt=attempt, point=point, paths=files,
                  time_limit_s=backend.time_limit_s(point))


def existing_launch(paths: StudyPaths, row: AttemptRow, backend: Backend | None) -> Launch | None:
    """The launch of a recorded attempt, from its task.json; None if that is gone or unreadable.

    It carries its point's time limit from the backend, as a new launch would: an attempt adopted after
    studyctl was killed is timed out like any other (counted from its own start by the backend).
    """
    files = paths.attempt(row.point_id, row.attempt)
    try:
        task = WorkerTask.model_validate_json(files.task.read_text())
    except (OSError, ValueError):
        return None
    limit = backend.time_limit_s(task.point) if backend is not None else None
    return Launch(study=paths.name, point_id=row.point_id, attempt=row.attempt, point=task.point, paths=files,
                  time_limit_s=limit)
