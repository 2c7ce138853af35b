"""What a rank knows while it measures one point, shared by the run's steps and its result record."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from studyctl.definition.layout import rank_files, summarize
from studyctl.definition.points import ColdReadMethod, WorkerTask, restore_files
from worker import provenance

if TYPE_CHECKING:  # the S3 client (boto3) is loaded only by a point that writes objects
    from worker.objects import ObjectStore


@dataclass(frozen=True)
class Setup:
    """What rank 0 decided before any data moved; broadcast to every rank."""

    error: tuple[str, str] | None
    io_mode: str
    fallback_reason: str | None
    cold_read: ColdReadMethod
    free_before: int
    total: int


class Run:
    """What one rank knows about the point it measures: its layout, files and directory."""

    def __init__(self, task: WorkerTask, comm: Any) -> None:
        self.task = task
        self.comm = comm
        self.point = task.point
        self.opts = task.point.checkpoint
        self.rank = comm.Get_rank()
        self.par = task.point.parallelism
        self.written = summarize(self.point.model, self.par, self.opts.scale)
        self.point_dir = task.data_dir  # the only directory the worker writes in or deletes
        self.host = os.uname().nodename
        self.node, self.simulated = provenance.node_name(self.rank, self.point.ranks_per_node)
        self.my_files = rank_files(self.point.model, self.par, self.rank, self.opts.scale, self.opts.naming)
        self.my_reads = restore_files(self.point.model, self.par, self.rank, self.opts)
        # a filesystem of kind s3: the rank's client of the point's objects (worker.objects); None: POSIX
        self.objects: ObjectStore | None = None
        if task.object_store is not None:
            from worker.objects import ObjectStore

            self.objects = ObjectStore(task)
