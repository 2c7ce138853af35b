"""Where a point's checkpoints live, behind one protocol (`base.Storage`): POSIX files or S3 objects, chosen
once per run here. The object implementation (and with it boto3) is imported only by a point that writes
objects: every rank pays its imports before the point starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studyctl.definition.checkpoint.points import WorkerTask
from worker.storage.base import Describe, Mount, Setup, Storage, read_files, write_files
from worker.storage.posix import FileChunks, PosixStorage, local_read_stream, local_write_stream

if TYPE_CHECKING:
    from worker.storage.objects import ObjectStorage

__all__ = ["Describe", "FileChunks", "Mount", "Setup", "Storage", "local_read_stream", "local_write_stream",
           "open_storage", "read_files", "remove_after_crash", "write_files"]


def _kind(task: WorkerTask) -> type[PosixStorage] | type[ObjectStorage]:
    """The one place the worker asks what its target is: a filesystem of kind s3 holds objects."""
    if task.object_store is None:
        return PosixStorage
    from worker.storage.objects import ObjectStorage

    return ObjectStorage


def open_storage(task: WorkerTask, rank: int) -> Storage:
    """This rank's storage of the point (an S3 client where it writes objects)."""
    return _kind(task)(task, rank)


def remove_after_crash(task: WorkerTask) -> None:
    """After an unexpected exception, with no storage to trust: what the target lets a rank remove itself."""
    _kind(task).remove_after_crash(task)
