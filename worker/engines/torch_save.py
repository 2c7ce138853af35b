"""The `torch.save` engine: each DLIO file is one `torch.save` of that file's tensors, under DLIO's name.

This is DeepSpeed's default checkpoint engine and DLIO v2's `pt_save`. Each save streams into the target's
`open_write` (a file, or an object of a store: the same serialisation either way) and each load reads its
`open_read`, so the time inside the storage calls is counted apart from torch's own. `torch.save` of device
tensors copies them to the host itself (pageable, or through pinned buffers when torch's
`use_pinned_memory_for_d2h` is set: the `pinned` option), so with `device: cuda` that copy is inside the
timed save as in a real run. An fsynced point fsyncs each file as its stream closes, the way a user's script
makes a checkpoint durable (torch.save does not).
Restores are `torch.load(map_location=device, weights_only=True)` of each file, then what the framework's
`load_state_dict` does with it: a model file is copied into the allocated parameters (`Module.load_state_dict`);
an optimizer file is copied into the allocated partitions where the state is flat fp32 partitions (`state:
megatron`: DeepSpeed's and Megatron's optimizers copy into their flat buffers), and kept as loaded where it is
torch.optim's (`state: torch`: `Optimizer.load_state_dict` keeps the loaded tensors, already on the device).

The async save does what DeepSpeed's and simple async checkpointers do: it blocks for a snapshot (every tensor
copied to host memory: a device copy, into reused pinned buffers when asked; a host clone on cpu), then
`torch.save`s the snapshot from a background thread.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch.utils.serialization import config as serialization_config

from worker.engines.base import AsyncHandle, BaseEngine, EngineName, EngineOptions, Target, Timing
from worker.engines.device import synchronize
from worker.engines.state import RankState


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Counted:
    """A write stream that counts the bytes torch.save hands it (an object's upload has no position to ask)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.nbytes = raw, 0

    def write(self, b: Any) -> int:
        self.nbytes += memoryview(b).nbytes
        return self.raw.write(b)

    def flush(self) -> None:
        self.raw.flush()


class TorchSaveEngine(BaseEngine):
    name: EngineName = "torch_save"

    def __init__(self, state: RankState, opts: EngineOptions, target: Target) -> None:
        super().__init__(state, opts, target)
        self._written: dict[int, list[tuple[str, int]]] = {}  # per checkpoint: (file, bytes) as saved
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
        """One torch.save per file into the target's stream (fsynced on close where the point fsyncs), then the
        directory, where there is one, made durable too."""
        target = self.target
        written = []
        for name, tensors in files.items():
            with target.open_write(step, name) as raw:
                out = _Counted(raw)
                torch.save(tensors, out)  # type: ignore[arg-type]  # torch calls write and flush only
            written.append((name, out.nbytes))
        directory = target.step_path(step)
        if self.opts.fsync and directory is not None:
            fsync_path(directory)
        self._written[step] = written

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

    def load(self, step: int, into: RankState | None = None) -> Timing:
        """Each file of `into`'s plan torch.loaded from the target's stream, then copied into its allocated
        tensors or kept as loaded, as the framework's `load_state_dict` does (module docstring)."""
        state = into if into is not None else self.state
        start = time.perf_counter()
        nbytes = 0
        for f in state.plan:
            with self.target.open_read(step, f.file.name) as stream:
                loaded = torch.load(stream, map_location=state.device, weights_only=True)
                nbytes += stream.seek(0, os.SEEK_END)  # the file's size: what torch.load read
            into_tensors = state.files.get(f.file.name)
            if into_tensors is None or (f.file.kind != "model" and self.opts.state == "torch"):
                state.files[f.file.name] = loaded
                continue
            for name, t in loaded.items():  # into the allocated state, as load_state_dict copies
                into_tensors[name].copy_(t)
        synchronize(state.device)
        return Timing(time.perf_counter() - start, nbytes)

    def files(self, step: int) -> list[tuple[str, int]]:
        """(name, bytes) of this rank's files of `step` as its save wrote them (on a target with directories,
        read back from them where this process did not write the step)."""
        if step in self._written:
            return list(self._written[step])
        directory = self.step_path(step)
        return [(name, (directory / name).stat().st_size) for name in self.state.files]

    def forget(self, step: int) -> None:
        self._written.pop(step, None)

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        if self._saved_config is not None:
            serialization_config.save.compute_crc32, serialization_config.save.use_pinned_memory_for_d2h = \
                self._saved_config
        self._snapshot.clear()
        super().close()
