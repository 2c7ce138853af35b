"""A rank's checkpoint state as real torch tensors: allocated on its device, filled, stamped per checkpoint.

The tensors are the plan's (`studyctl.definition.checkpoint.engine_tensors`): per file, its named tensors with the
layout's
dtypes and sizes. They are filled with random bytes once (off the clock), and before each checkpoint two bytes of
every 4 KiB page get the checkpoint's tag, so no two checkpoints are byte-equal (deduplicating or compressing
storage sees a real run's changing weights, as the stream writer's `Buffer.stamp` does) and every page is
touched before the clock starts.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from studyctl.definition.checkpoint.engine_tensors import TORCH_DTYPES, FileTensors
from worker.engines.device import synchronize

PAGE = 4096


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's memory as a flat uint8 view (the tensors are contiguous: 1-D, or 0-dim steps)."""
    return t.reshape(-1).view(torch.uint8)


class RankState:
    """file name → {tensor name → tensor}: what a framework holds for the files this rank writes."""

    def __init__(self, plan: list[FileTensors], device: torch.device, seed: int) -> None:
        self.plan = plan
        self.device = device
        self.seed = seed
        self.files: dict[str, dict[str, torch.Tensor]] = {}

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.plan)

    def allocate(self, fill: bool = True) -> None:
        """Every tensor of the plan, filled with random bytes (a state to save), or zeros (one a restore fills:
        its pages touched all the same, as a training run's allocated state is)."""
        gen = torch.Generator(device=self.device).manual_seed(self.seed)
        for f in self.plan:
            self.files[f.file.name] = {
                t.name: self._filled(t.shape, getattr(torch, TORCH_DTYPES[t.dtype]), gen) if fill else
                torch.zeros(t.shape, dtype=getattr(torch, TORCH_DTYPES[t.dtype]), device=self.device)
                for t in f.tensors}
        synchronize(self.device)

    def _filled(self, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
        t = torch.empty(shape, dtype=dtype, device=self.device)
        as_bytes(t).random_(0, 256, generator=gen)
        return t

    def tensors(self) -> list[torch.Tensor]:
        return [t for named in self.files.values() for t in named.values()]

    def stamp(self, tag: int) -> None:
        """Write the checkpoint's tag into two bytes of every page of every tensor (module docstring)."""
        for t in self.tensors():
            raw = as_bytes(t)
            raw[::PAGE] = tag & 0xFF
            raw[1::PAGE] = (tag >> 8) & 0xFF
        synchronize(self.device)

    def by_kind(self) -> dict[str, dict[str, Any]]:
        """The state dict a training run hands DCP: {"model": {...}, "optim": {...}} (names unique per rank)."""
        out: dict[str, dict[str, Any]] = {"model": {}, "optim": {}}
        for f in self.plan:
            out["model" if f.file.kind == "model" else "optim"].update(self.files[f.file.name])
        return out

    def digest(self) -> str:
        """A hash of every tensor's bytes in plan order: equal before a save and after its restore."""
        h = hashlib.blake2b(digest_size=16)
        for f in self.plan:
            self._hash(h, f)
        return h.hexdigest()

    def file_digests(self) -> dict[str, str]:
        """Per file, a hash of its tensors' bytes: a restore of files other ranks wrote checks against theirs."""
        out = {}
        for f in self.plan:
            h = hashlib.blake2b(digest_size=16)
            self._hash(h, f)
            out[f.file.name] = h.hexdigest()
        return out

    def _hash(self, h: Any, f: FileTensors) -> None:
        for t in f.tensors:
            h.update(t.name.encode())
            h.update(as_bytes(self.files[f.file.name][t.name]).cpu().numpy().tobytes())

    def release(self) -> None:
        self.files.clear()
