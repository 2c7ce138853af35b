"""An attempt's checkpoint files on the measured filesystem: removed after a failure, never under a live writer."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil

from studyctl.attempt.paths import AttemptPaths
from studyctl.definition.points import WorkerTask


def read_task(paths: AttemptPaths) -> WorkerTask | None:
    try:
        return WorkerTask.model_validate_json(paths.task.read_text())
    except (OSError, ValueError):
        return None


def remove_unclaimed_data(task: WorkerTask) -> bool:
    """Remove the attempt's data directory unless the point keeps its files or a live run holds its claim.

    The worker removes its own files when it can; a killed or crashed one cannot, and at full scale they are
    hundreds of GiB. The claim (the worker's flock) tells a dead writer from a live one, on any backend.
    """
    target = task.data_dir
    if task.point.checkpoint.keep or not target.is_dir() or target.is_symlink():
        return False
    try:
        fd = os.open(task.claim_file, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live run writes there (perhaps another attempt): not ours to delete
        shutil.rmtree(target, ignore_errors=True)
        task.claim_file.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            target.parent.rmdir()  # the study's data directory, once its last point is gone
        return True
    finally:
        os.close(fd)
