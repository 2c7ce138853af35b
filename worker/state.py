"""What a rank knows while it measures one point, shared by the run's steps and its result record."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from studyctl.definition.checkpoint.layout import rank_files, summarize
from studyctl.definition.checkpoint.points import WorkerTask, restore_files
from worker import provenance
from worker.storage import Setup, Storage, open_storage

if TYPE_CHECKING:
    from worker.engine_point import EnginePoint

__all__ = ["Run", "Setup"]


class Run:
    """What one rank knows about the point it measures: its layout, files and directory."""

    def __init__(self, task: WorkerTask, comm: Any) -> None:
        self.task = task
        self.comm = comm
        self.point = task.point
        self.opts = task.point.checkpoint
        self.rank = comm.Get_rank()
        self.par = task.point.parallelism
        self.written = summarize(self.point.model, self.par, self.opts.scale, self.opts.convention)
        self.point_dir = task.data_dir  # the only directory the worker writes in or deletes
        self.host = os.uname().nodename
        self.node, self.simulated = provenance.node_name(self.rank, self.point.ranks_per_node)
        self.my_files = rank_files(self.point.model, self.par, self.rank, self.opts.scale, self.opts.naming,
                                   self.opts.convention)
        self.my_reads = restore_files(self.point.model, self.par, self.rank, self.opts)
        self.storage: Storage = open_storage(task, self.rank)  # files or objects, the run's one choice
        self.engine: EnginePoint | None = None  # an engine point's real tensors and framework (worker.engine_point)
