"""The plain-PyTorch reference for the checkpoint engines: what a user's script does with the same tensors.

    mpiexec -n N python -m benchmarks.engines_direct CONFIG.json OUT.json   (in the repo root)

CONFIG: {"model", "tp", "pp", "zero", "scale", "root", "engine": "torch_save"|"dcp", "saves": ["sync"|"async"],
"fsync", "crc32", "dcp_threads", "threads"}. Nothing of studyctl runs here but the list of tensors (names, dtypes,
sizes) each rank holds, from `studyctl.definition.checkpoint.engine_tensors`, so the comparison is of the same bytes.
The rest is
what a user writes: random tensors, each checkpoint into a fresh directory: `torch.save` of each file's dict
(then an fsync of the file and the directory), or `dcp.save` / `dcp.async_save` with a `FileSystemWriter`
(async: the stager a CPU job configures); after the saves, the first checkpoint's pages dropped with fadvise, a
barrier, then `torch.load` (copied into allocated tensors, as load_state_dict does) / `dcp.load` into them, each
timed on the rank from the call to its return. The sequence is a studyctl engine point's (its writes, then one
cold restore of checkpoint 0, one process per point): a load between saves would free the saved tensors and leave
the allocator memory that the next snapshot reuses without page faults, which a training run's snapshot does not
find. The files' lifecycle is the point's too: the state the restore fills is allocated before the saves, and each
checkpoint no restore reads (all but the first) is deleted right after its save, off the clock, as the worker frees
its space. On this VM that decides what a save costs: page-cache pages freed a moment ago are reused at no cost,
while memory that sat free has been reported to the host (virtio-balloon free page reporting) and costs the
writing process ~10 us of CPU a page to touch again (`benchmarks/page_reuse.py`; RESULTS.md): a script that kept
every checkpoint wrote into such memory and spent 3x the CPU of the worker's saves on the same bytes.
The ranks meet before each timed call the way studyctl's phases do, without spinning: MPICH busy-polls
in a blocking barrier, so a rank done first (rank 1 holds a smaller share) would burn a core of this 2-core
machine in the next save's barrier while the other rank still writes (measured: 0.65 s of CPU per save against
0.09 s); the worker's ranks wait with a polled Ibarrier instead, and so does this script. Torch's intra-op
threads are `threads` (the benchmark sets the same in the worker's environment). Rank 0 writes every rank's
seconds, CPU seconds (the process's, every thread's) and bytes as JSON. mpi4py is imported in `main`: DCP's
process executor re-imports this module.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64,
          "fp8": torch.float8_e4m3fn, "uint8": torch.uint8}


def tensors(config: dict[str, Any], rank: int, world: int) -> dict[str, dict[str, torch.Tensor]]:
    from studyctl.definition.checkpoint.engine_tensors import file_tensors
    from studyctl.definition.checkpoint.layout import Parallelism
    from studyctl.definition.inputs.catalog import CATALOG

    par = Parallelism(config["tp"], config["pp"], world // (config["tp"] * config["pp"]), config["zero"])
    out = {}
    for f in file_tensors(CATALOG[config["model"]], par, rank, config["scale"]):
        named = {}
        for t in f.tensors:
            named[t.name] = torch.empty(t.shape, dtype=DTYPES[t.dtype])
            named[t.name].reshape(-1).view(torch.uint8).random_(0, 256)
        out[f.file.name] = named
    return out


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def drop_pages(paths: list[Path]) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def torch_save(state: dict[str, dict[str, torch.Tensor]], d: Path, do_fsync: bool) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, named in state.items():
        torch.save(named, d / name)
        if do_fsync:
            fsync(d / name)
    if do_fsync:
        fsync(d)


YIELD_S = 0.001  # a waiting rank's poll interval


def meet(comm: Any) -> None:
    """A barrier that sleeps while it waits (module docstring: MPICH's blocking one spins)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(YIELD_S)


def timed(record: Callable[[], dict[str, float]]) -> dict[str, float]:
    """The call's figures, with the process's CPU seconds over it."""
    cpu = time.process_time()
    out = record()
    return {**out, "cpu_s": time.process_time() - cpu}


def save(comm: Any, config: dict[str, Any], state: dict[str, dict[str, torch.Tensor]], step: int,
         how: str) -> dict[str, float]:
    """One checkpoint into a fresh directory, timed on the rank from the call to its return (files durable)."""
    d = Path(config["root"]) / f"step{step}"
    writer = dcp.FileSystemWriter(d, thread_count=config["dcp_threads"], sync_files=config["fsync"])
    meet(comm)
    return timed(lambda: _save(config, state, d, writer, how))


def _save(config: dict[str, Any], state: dict[str, dict[str, torch.Tensor]], d: Path,
          writer: dcp.FileSystemWriter, how: str) -> dict[str, float]:
    start = time.perf_counter()
    if config["engine"] == "torch_save" and how == "sync":
        torch_save(state, d, config["fsync"])
        return {"seconds": time.perf_counter() - start}
    if config["engine"] == "torch_save":  # the snapshot blocks; torch.save runs in the checkpointer's thread
        snapshot = {n: {k: t.clone() for k, t in named.items()} for n, named in state.items()}
        blocked = time.perf_counter() - start
        writer_thread().submit(torch_save, snapshot, d, config["fsync"]).result()
        return {"blocked_s": blocked, "done_s": time.perf_counter() - start}
    if how == "sync":
        dcp.save(by_kind(state), storage_writer=writer)
        return {"seconds": time.perf_counter() - start}
    # the stager a CPU job configures (no pinned or shared memory, staging on the caller's thread); without
    # one, DCP would stage through the writer's own BlockingAsyncStager, other code than a configured job's
    stager = DefaultStager(StagingOptions(False, False, False, False))
    future = dcp.async_save(by_kind(state), storage_writer=writer, async_stager=stager)
    blocked = time.perf_counter() - start
    future.result()  # type: ignore[union-attr]
    stager.close()
    return {"blocked_s": blocked, "done_s": time.perf_counter() - start}


@cache
def writer_thread() -> ThreadPoolExecutor:
    """An async checkpointer's one writer thread, started once and kept (as the torch_save engine keeps its own)."""
    return ThreadPoolExecutor(1, thread_name_prefix="torch-save")


def by_kind(state: dict[str, dict[str, torch.Tensor]]) -> dict[str, dict[str, torch.Tensor]]:
    out: dict[str, dict[str, torch.Tensor]] = {"model": {}, "optim": {}}
    for name, named in state.items():
        out["optim" if name.endswith("optim_states.pt") else "model"].update(named)
    return out


def forget(comm: Any, d: Path) -> None:
    """A checkpoint's directory deleted once every rank has written it."""
    meet(comm)
    if comm.Get_rank() == 0:
        shutil.rmtree(d)
    meet(comm)


def load(comm: Any, config: dict[str, Any], state: dict[str, dict[str, torch.Tensor]],
         into: dict[str, dict[str, torch.Tensor]]) -> dict[str, float]:
    """The cold restore of the first checkpoint into `into`, an allocated state of zeros (a model's parameters):
    every file the rank reads evicted (DCP's ranks read every file of the step), a barrier, then the timed load."""
    d = Path(config["root"]) / "step0"
    rank = comm.Get_rank()
    mine = [d / n for n in state] if config["engine"] == "torch_save" else [
        p for p in d.iterdir() if p.name.startswith(f"__{rank}_") or (rank == 0 and p.name == ".metadata")]
    drop_pages([d / n for n in state] if config["engine"] == "torch_save" else list(d.iterdir()))
    meet(comm)
    got = timed(lambda: _load(config, d, into))
    return {**got, "nbytes": sum(p.stat().st_size for p in mine)}


def _load(config: dict[str, Any], d: Path, into: dict[str, dict[str, torch.Tensor]]) -> dict[str, float]:
    start = time.perf_counter()
    if config["engine"] == "torch_save":
        for name, named in into.items():  # into the allocated tensors, as load_state_dict copies
            for k, t in torch.load(d / name, map_location="cpu", weights_only=True).items():
                named[k].copy_(t)
    else:
        dcp.load(by_kind(into), storage_reader=dcp.FileSystemReader(d))
    return {"load_s": time.perf_counter() - start}


def main(config_path: str, out_path: str) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    config = {"fsync": True, "crc32": True, "dcp_threads": 1, "threads": 1, **json.loads(Path(config_path).read_text())}
    torch.serialization.set_crc32_options(config["crc32"])
    torch.set_num_threads(config["threads"])
    if config["engine"] == "dcp":
        host = socket.gethostname()
        store = dist.TCPStore(host, 0, world, is_master=True, wait_for_workers=False) if rank == 0 else None
        host, port = comm.bcast((host, store.port) if store else None, root=0)
        store = store or dist.TCPStore(host, port, world, is_master=False)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    state = tensors(config, rank, world)
    into = {n: {k: torch.zeros_like(t) for k, t in named.items()} for n, named in state.items()}
    record = []
    for step, how in enumerate(config["saves"]):
        record.append(save(comm, config, state, step, how))
        if step > 0:  # no restore reads it (module docstring)
            forget(comm, Path(config["root"]) / f"step{step}")
    record.append(load(comm, config, state, into))
    record.append({"threads": torch.get_num_threads()})
    records = comm.gather(record, root=0)
    if rank == 0:
        Path(out_path).write_text(json.dumps(records))
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
