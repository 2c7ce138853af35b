"""Checkpoint engines: a rank's real torch tensors saved and restored through a training framework's own calls.

`stream` (the worker's raw-byte writer) is not here: it needs no torch. Importing this package imports torch,
so the worker imports it only for a point whose engine is one of `ENGINES`.
"""

from __future__ import annotations

from typing import Any

from studyctl.definition.checkpoint.engine_tensors import FileTensors
from worker.engines.base import (
    AsyncHandle,
    AsyncTiming,
    Engine,
    EngineOptions,
    PathTarget,
    StepPath,
    Target,
    Timing,
)
from worker.engines.dcp import DcpEngine
from worker.engines.device import EngineConfigError, resolve_device
from worker.engines.group import end_group, start_group
from worker.engines.state import RankState
from worker.engines.torch_save import TorchSaveEngine

ENGINES: dict[str, type[TorchSaveEngine] | type[DcpEngine]] = {e.name: e for e in (TorchSaveEngine, DcpEngine)}

__all__ = ["ENGINES", "AsyncHandle", "AsyncTiming", "Engine", "EngineConfigError", "EngineOptions", "PathTarget",
           "RankState", "Target", "Timing", "end_group", "make_engine"]


def make_engine(opts: EngineOptions, plan: list[FileTensors], target: Target | StepPath, comm: Any) -> Engine:
    """The point's engine for this rank (`comm`: the point's MPI communicator), its tensors not yet allocated;
    `target`: where its files go (a directory per checkpoint index is plain files there). Raises
    EngineConfigError, before anything is written, when the point's device or engine cannot be had."""
    if opts.engine not in ENGINES:
        raise EngineConfigError(f"checkpoint.engine {opts.engine!r}: not one of {', '.join(ENGINES)}")
    device = resolve_device(opts.device)
    where = PathTarget(target, opts.fsync) if callable(target) else target
    if opts.engine == DcpEngine.name:
        where_path = where.step_path(0)
        if where_path is None:
            raise EngineConfigError("checkpoint.engine dcp needs a filesystem directory (its FileSystemWriter), "
                                    "and the point's filesystem is an object store")
        start_group(comm, device.type)
    state = RankState(plan, device, seed=comm.Get_rank())
    return ENGINES[opts.engine](state, opts, where)
