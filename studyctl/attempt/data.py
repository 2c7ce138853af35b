"""An attempt's checkpoint files, wherever the point wrote them: removed once it has ended, never under a
live writer, never anywhere studyctl cannot prove it wrote for this study and point.

The places are derived from what the study itself knows (its directory's name and key, the point's
configuration in the ledger, whose hash is its id, and the sweep's filesystems), never taken from a file an
attempt left: a task.json that names other places (planted, or from another study) removes nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from typing import Any

from studyctl.attempt.paths import AttemptPaths, StudyPaths
from studyctl.definition.checkpoint.places import Place, point_places, study_dir_name
from studyctl.definition.checkpoint.points import Point, WorkerTask, data_key
from studyctl.definition.inputs.filesystems import ObjectStoreSpec
from studyctl.removal import remove_place

# Removes a node-local place on every node the attempt ran on; True once done (False: try again later).
RemoveNodeLocal = Callable[[Place], bool]


class Cleanup(Enum):
    DONE = "done"  # nothing of the attempt is left (or the point keeps its files)
    HELD = "held"  # a process holds the point's claim: a live run, or one whose exit has not closed its files yet
    LATER = "later"  # a node's place is not cleaned yet
    REFUSED = "refused"  # the places cannot be proven the study's own: nothing is touched, ever


def read_task(paths: AttemptPaths) -> WorkerTask | None:
    try:
        return WorkerTask.model_validate_json(paths.task.read_text())
    except (OSError, ValueError):
        return None


def derive_places(study: StudyPaths, point_id: str, config: Mapping[str, Any] | None,
                  filesystems: Mapping[str, str], stores: Mapping[str, ObjectStoreSpec] | None = None
                  ) -> tuple[Point, tuple[Place, ...]] | str:
    """The point (from its configuration, which must hash to `point_id`) and every place it writes; or why not."""
    try:
        point = Point.model_validate(config)
    except ValueError:
        return f"point {point_id}: the ledger holds no valid configuration for it"
    if point.point_id != point_id:
        return f"point {point_id}: its configuration in the ledger hashes to {point.point_id}"
    tier = point.checkpoint.tier
    if point.filesystem not in filesystems or (tier is not None and tier not in filesystems):
        return f"point {point_id}: the sweep names no filesystem {point.filesystem!r} (or tier {tier!r})"
    places = point_places(study_dir_name(study.name, data_key(study.root)), point_id, filesystems[point.filesystem],
                          filesystems[tier] if tier is not None else None, (stores or {}).get(point.filesystem))
    problems = [p for place in places if (p := place.problem())]
    return f"point {point_id}: {problems[0]}" if problems else (point, places)


def task_disagrees(paths: AttemptPaths, places: Sequence[Place]) -> str | None:
    """Why the attempt's task.json names places other than the derived ones, or None (it agrees, or is gone)."""
    task = read_task(paths)
    if task is None or task.places == tuple(places):
        return None
    return (f"{paths.task} names {', '.join(str(p.path) for p in task.places)}, not the study's own "
            f"{', '.join(str(p.path) for p in places)}")


def remove_attempt_data(point: Point, places: Sequence[Place], remove_node_local: RemoveNodeLocal,
                        problems: list[str] | None = None) -> Cleanup:
    """Remove every place of a finished attempt, holding the point's claim meanwhile (a live writer holds it:
    HELD). The worker removes its own files when it can; a killed or crashed one cannot, and at full scale
    they are hundreds of GiB. Why an object store's place was left (LATER) is added to `problems`."""
    if point.checkpoint.keep:
        return Cleanup.DONE
    shared, *node_local = places
    if shared.store is not None:  # an object store: no claim file; its ranks are gone (the caller waited)
        from studyctl.attempt.objects import remove_object_place

        problem = remove_object_place(shared)
        if problem is not None and problems is not None:
            problems.append(problem)
        return Cleanup.DONE if problem is None and all(remove_node_local(p) for p in node_local) \
            else Cleanup.LATER
    with _claim(shared) as held:
        if not held:
            return Cleanup.HELD
        remove_place(shared)
        done = all(remove_node_local(place) for place in node_local)
    return Cleanup.DONE if done else Cleanup.LATER


@contextlib.contextmanager
def _claim(place: Place) -> Iterator[bool]:
    """Yields whether the point's claim could be taken (True too when the study has no directory there: no
    worker of it ever wrote, or its data is gone). Opened without following links, below the root."""
    try:
        study_fd = os.open(os.path.join(place.root, place.study_dir), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        yield True
        return
    try:
        fd = os.open(place.claim_file.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644, dir_fd=study_fd)
    except OSError:
        os.close(study_fd)
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False  # a live run writes there (perhaps another attempt): not ours to delete yet
            return
        yield True
    finally:
        os.close(fd)
        os.close(study_fd)
