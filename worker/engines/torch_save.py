"""The `torch.save` engine: each DLIO file is one `torch.save` of that file's tensors, under DLIO's name.

This is DeepSpeed's default checkpoint engine and DLIO v2's `pt_save`. `torch.save` of device tensors copies them
to the host itself (pageable, or through pinned buffers when torch's `use_pinned_memory_for_d2h` is set: the
`pinned` option), so with `device: cuda` that copy is inside the timed save as in a real run. An fsynced point
fsyncs each file after its save, the way a user's script makes a checkpoint durable (torch.save does not).
Restores are `torch.load(map_location=device, weights_only=True)` of each file; the loaded tensors become the
rank's state, as `load_state_dict` would take them.

The async save does what DeepSpeed's and simple async checkpointers do: it blocks for a snapshot (every tensor
copied to host memory: a device copy, into reused pinned buffers when asked; a host clone on cpu), then
`torch.save`s the snapshot from a background thread.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch
from torch.utils.serialization import config as serialization_config

from worker.engines.base import AsyncHandle, BaseEngine, EngineName, EngineOptions, StepPath, Timing
from worker.engines.device import synchronize
from worker.engines.state import RankState


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TorchSaveEngine(BaseEngine):
    name: EngineName = "torch_save"

    def __init__(self, state: RankState, opts: EngineOptions, step_path: StepPath) -> None:
        super().__init__(state, opts, step_path)
        self.pinned = opts.pinned and self.gpu
        self._snapshot: dict[str, dict[str, torch.Tensor]] = {}  # reused pinned buffers of async saves
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torch-save")
        self._saved_config: tuple[bool, bool] | None = None

    def allocate(self) -> None:
        """The rank's tensors, and torch's save settings for the point (restored by `close`)."""
        save = serialization_config.save
        self._saved_config = (save.compute_crc32, save.use_pinned_memory_for_d2h)
        save.compute_crc32 = self.opts.crc32
        save.use_pinned_memory_for_d2h = self.pinned
        super().allocate()

    def _write(self, step: int, files: dict[str, dict[str, torch.Tensor]]) -> None:
        directory = self.step_path(step)
        directory.mkdir(parents=True, exist_ok=True)
        for name, tensors in files.items():
            torch.save(tensors, directory / name)
            if self.opts.fsync:
                fsync_path(directory / name)
        if self.opts.fsync:
            fsync_path(directory)

    def save(self, step: int) -> Timing:
        self.state.stamp(step)
        start = time.perf_counter()
        self._write(step, self.state.files)
        return Timing(time.perf_counter() - start, self.nbytes(step))

    def _host_copy(self) -> dict[str, dict[str, torch.Tensor]]:
        """The snapshot an async save persists: host copies of every tensor."""
        if self.state.device.type == "cpu":
            return {f: {k: t.clone() for k, t in named.items()} for f, named in self.state.files.items()}
        if not self.pinned:
            return {f: {k: t.to("cpu") for k, t in named.items()} for f, named in self.state.files.items()}
        if not self._snapshot:
            self._snapshot = {f: {k: torch.empty_like(t, device="cpu", pin_memory=True) for k, t in named.items()}
                              for f, named in self.state.files.items()}
        for f, named in self.state.files.items():
            for k, t in named.items():
                self._snapshot[f][k].copy_(t, non_blocking=True)
        synchronize(self.state.device)
        return self._snapshot

    def async_save(self, step: int) -> AsyncHandle:
        self.state.stamp(step)
        start = time.perf_counter()
        snapshot = self._host_copy()
        blocked = time.perf_counter() - start
        upload: Future[None] = self._writer.submit(self._write, step, snapshot)
        return AsyncHandle(start, blocked, upload, None, lambda: self.nbytes(step))

    def load(self, step: int) -> Timing:
        directory = self.step_path(step)
        start = time.perf_counter()
        for name in self.state.files:
            self.state.files[name] = torch.load(directory / name, map_location=self.state.device, weights_only=True)
        synchronize(self.state.device)
        return Timing(time.perf_counter() - start, self.nbytes(step))

    def files(self, step: int) -> list[tuple[str, int]]:
        directory = self.step_path(step)
        return [(name, (directory / name).stat().st_size) for name in self.state.files]

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        if self._saved_config is not None:
            serialization_config.save.compute_crc32, serialization_config.save.use_pinned_memory_for_d2h = \
                self._saved_config
        self._snapshot.clear()
        super().close()
