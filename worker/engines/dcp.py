"""The torch.distributed.checkpoint engine: the rank's tensors saved with DCP over the point's ranks.

This is what PyTorch FSDP2 / torchtitan and Megatron's `torch_dist` format do: one collective `dcp.save` of the
state dict {"model": ..., "optim": ...} through a `FileSystemWriter` (its writer threads, fsync as the point
says), DCP's own files (`__<rank>_<i>.distcp` per rank and writer thread, `.metadata` from rank 0). Every
rank's tensor names are its own, so DCP saves every rank's tensors rather than deduplicating them as replicas.
Restores are a collective `dcp.load` into the allocated state.

Async saves are `dcp.async_save` with a fresh `DefaultStager` per save (a reused one fails in torch 2.11; it is
closed when the save ends), built from the point's stager options (pinned only with a GPU, non-blocking copies
only with a GPU, which DefaultStager requires), and the thread or process executor. What training waits for is
the time until `async_save` returns; with async staging, DCP's staging future says when the state was copied.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import DEFAULT_SUFFIX
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType, AsyncSaveResponse

from worker.engines.base import AsyncHandle, BaseEngine, EngineName, EngineOptions, StepPath, Timing
from worker.engines.device import synchronize
from worker.engines.state import RankState

METADATA = ".metadata"


class DcpEngine(BaseEngine):
    name: EngineName = "dcp"

    def __init__(self, state: RankState, opts: EngineOptions, step_path: StepPath) -> None:
        super().__init__(state, opts, step_path)
        self.rank = dist.get_rank()

    def _writer(self, step: int) -> dcp.FileSystemWriter:
        return dcp.FileSystemWriter(self.step_path(step), thread_count=self.opts.dcp_threads,
                                    sync_files=self.opts.fsync)

    def save(self, step: int) -> Timing:
        self.state.stamp(step)
        start = time.perf_counter()
        dcp.save(self.state.by_kind(), storage_writer=self._writer(step))
        return Timing(time.perf_counter() - start, self.nbytes(step))

    def _stager(self) -> DefaultStager:
        return DefaultStager(StagingOptions(use_pinned_memory=self.opts.pinned and self.gpu,
                                            use_shared_memory=self.opts.stager_shared,
                                            use_async_staging=self.opts.stager_async,
                                            use_non_blocking_copy=self.gpu))

    def async_save(self, step: int) -> AsyncHandle:
        self.state.stamp(step)
        stager = self._stager()
        executor = AsyncCheckpointerType(self.opts.dcp_executor)
        start = time.perf_counter()
        response = dcp.async_save(self.state.by_kind(), storage_writer=self._writer(step),
                                  async_checkpointer_type=executor, async_stager=stager)
        blocked = time.perf_counter() - start
        if isinstance(response, AsyncSaveResponse):
            upload, staging = response.upload_completion, response.staging_completion
        else:
            upload, staging = response, None
        return AsyncHandle(start, blocked, upload, staging, lambda: self.nbytes(step), stager.close)

    def load(self, step: int) -> Timing:
        start = time.perf_counter()
        dcp.load(self.state.by_kind(), storage_reader=dcp.FileSystemReader(self.step_path(step)))
        synchronize(self.state.device)
        return Timing(time.perf_counter() - start, self.nbytes(step))

    def files(self, step: int) -> list[tuple[str, int]]:
        """This rank's `.distcp` files, and `.metadata` on rank 0 (the coordinator writes it)."""
        directory: Path = self.step_path(step)
        mine = sorted(e.name for e in os.scandir(directory)
                      if e.name.startswith(f"__{self.rank}_") and e.name.endswith(DEFAULT_SUFFIX))
        if self.rank == 0:
            mine.append(METADATA)
        return [(name, (directory / name).stat().st_size) for name in mine]
