"""The torch.distributed.checkpoint engine: the rank's tensors saved with DCP over the point's ranks.

This is what PyTorch FSDP2 / torchtitan and Megatron's `torch_dist` format do: one collective `dcp.save` of the
state dict {"model": ..., "optim": ...} through a `FileSystemWriter` (its writer threads, fsync as the point
says), DCP's own files (`__<rank>_<i>.distcp` per rank and writer thread, `.metadata` from rank 0). Every
rank's tensor names are its own, so DCP saves every rank's tensors rather than deduplicating them as replicas.
Restores are a collective `dcp.load` into the allocated state.

Async saves are `dcp.async_save` with a fresh `DefaultStager` per save (a reused one fails in torch 2.11; it is
closed when the save ends), built from the point's stager options (pinned only with a GPU; non-blocking copies with
pinned memory alone, as a GPU requires and DCP's default stager does), and the thread or process executor. What
training waits for is the time until `async_save` returns; with async staging, DCP's staging future says when the
state was copied.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import DEFAULT_SUFFIX
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType, AsyncSaveResponse

from worker.engines.base import AsyncHandle, BaseEngine, EngineName, EngineOptions, Target, Timing
from worker.engines.device import synchronize
from worker.engines.state import RankState

METADATA = ".metadata"


class DcpEngine(BaseEngine):
    name: EngineName = "dcp"

    def __init__(self, state: RankState, opts: EngineOptions, target: Target) -> None:
        super().__init__(state, opts, target)
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
        """Non-blocking copies only into pinned memory: into pageable memory they gain nothing, and DCP's default
        stager (what `async_save` builds unasked, all options off) makes plain ones."""
        pinned = self.opts.pinned and self.gpu
        return DefaultStager(StagingOptions(use_pinned_memory=pinned,
                                            use_shared_memory=self.opts.stager_shared,
                                            use_async_staging=self.opts.stager_async,
                                            use_non_blocking_copy=pinned))

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

    def load(self, step: int, into: RankState | None = None) -> Timing:
        """A collective dcp.load of `into`'s tensors (every rank calls it, each with its own): DCP plans every
        rank's reads from `.metadata`, which every rank reads, and reads each tensor's record from whichever
        rank's file holds it. The bytes are those records and the metadata."""
        state = into if into is not None else self.state
        fallback = self.metadata_fallback(step) if self.metadata_fallback is not None else None
        reader = CountingReader(self.step_path(step), fallback)
        start = time.perf_counter()
        dcp.load(state.by_kind(), storage_reader=reader)
        synchronize(state.device)
        return Timing(time.perf_counter() - start, reader.nbytes)

    def files(self, step: int) -> list[tuple[str, int]]:
        """This rank's `.distcp` files, and `.metadata` on rank 0 (the coordinator writes it)."""
        directory: Path = self.step_path(step)
        mine = sorted(e.name for e in os.scandir(directory)
                      if e.name.startswith(f"__{self.rank}_") and e.name.endswith(DEFAULT_SUFFIX))
        if self.rank == 0:
            mine.append(METADATA)
        return [(name, (directory / name).stat().st_size) for name in mine]


class CountingReader(dcp.FileSystemReader):
    """DCP's FileSystemReader, counting the bytes it reads (the metadata file and each record it loads), and
    reading `.metadata` from `fallback` where the step's directory has none (a node-local tier: rank 0's node
    wrote it; the shared copy has it)."""

    def __init__(self, path: Path, fallback: Path | None) -> None:
        super().__init__(path)
        self.fallback = fallback
        self.nbytes = 0

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = Path(self.path) / METADATA
        if self.fallback is not None and not path.exists() and "rank" not in kwargs:
            original, self.path = self.path, self.fs.init_path(self.fallback)
            try:
                return self.read_metadata(*args, **kwargs)
            finally:
                self.path = original
        metadata = super().read_metadata(*args, **kwargs)
        self.nbytes += path.stat().st_size
        return metadata

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> torch.futures.Future[None]:
        records = {item.storage_index for item in plan.items}
        self.nbytes += sum(self.storage_data[index].length for index in records)
        return super().read_data(plan, planner)
