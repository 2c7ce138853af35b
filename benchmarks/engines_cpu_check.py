"""A real training job on this machine's CPU against studyctl's engine points of its layout (`engines_check`).

    python -m benchmarks engines_cpu [repeat]

The job: a GPT-2-shaped model of GPT-2 XL's depth and heads (48 layers, 25 heads) at hidden size 200 (33.4 M
parameters, 382 MiB of fp32 weights + Adam m, v), batch 1 x 16 tokens, fp32 (no AMP) and fused AdamW, one
intra-op thread: a step of ~0.35 s of CPU time here. Checkpointed with torch.save, DCP save, DCP async_save (the
default stager; shared memory + async staging) beside its steps, restored cold. studyctl runs the same layout
(`state: torch`, ZeRO 0, one rank, `device: cpu`) with `compute: cpu` and the job's idle step.

Why `compute: cpu` stands for "a node training on its CPU": the job's step occupies a core for all of its time
(kernels on the intra-op thread, Python dispatch between them), which is what `cpu` models: its dispatch
(`dispatch_share` of the step, holding the GIL: a persist thread that runs Python, DCP's writer per tensor, takes
turns with it) then its kernels (hashing on the same core, the GIL released); `accelerator` models a step whose
device part holds no core, which a CPU job does not have.
Every figure depends on this machine: 2 cores shared with other work (load printed), one virtio disk.
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import engines_check

NEIGHBOUR_BYTES = 64 << 20  # a GIL-free neighbour's buffer: hashing it holds a core, not the GIL


def _gil_free(stop: threading.Event) -> None:
    data = os.urandom(NEIGHBOUR_BYTES)
    while not stop.is_set():
        hashlib.blake2b(data).digest()


def _gil_bound(stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        n += 1


def slowdowns(step: Callable[[], object], steps: int = 6) -> dict[str, float]:
    """A step's median beside a thread holding a core only (hashing) and beside one holding the GIL (a Python
    loop), over its idle median (idle steps before and after)."""
    def timed() -> float:
        start = time.perf_counter()
        step()
        return time.perf_counter() - start

    got: dict[str, list[float]] = {}
    for name, neighbour in (("idle", None), ("core", _gil_free), ("GIL", _gil_bound), ("idle", None)):
        stop = threading.Event()
        thread = threading.Thread(target=neighbour, args=(stop,)) if neighbour else None
        if thread:
            thread.start()
        got.setdefault(name, []).extend(timed() for _ in range(steps))
        stop.set()
        if thread:
            thread.join()
    idle = statistics.median(got.pop("idle"))
    return {name: statistics.median(values) / idle for name, values in got.items()}


def sensitivity() -> None:
    """Whether `compute: cpu` stands for the real CPU step: both beside the same two neighbours (a persist's
    copies hold a core; its Python holds the GIL)."""
    import torch

    from benchmarks.real_training import SHAPES, Job
    from studyctl.definition.inputs.training import CPU_DISPATCH_SHARE
    from worker.compute import HostCompute

    torch.set_num_threads(1)
    job = Job(torch, SHAPES["cpu"], "cpu")
    job.steps(3)
    cpu = time.thread_time()
    idle = statistics.median(job.steps(5))
    cpu = (time.thread_time() - cpu) / 5
    host = HostCompute(idle, CPU_DISPATCH_SHARE)
    host.calibrate()
    print(f"# step sensitivity (load {os.getloadavg()[0]:.1f}): real step {idle:.3f} s wall, {cpu:.3f} s CPU")
    steps: tuple[tuple[str, Callable[[], object]], ...] = (("real torch step", job.step),
                                                          ("studyctl compute: cpu", host.run))
    for name, step in steps:
        got = slowdowns(step)
        print(f"{name}: beside a core-holding thread {got['core']:.2f}x, beside a GIL-holding thread "
              f"{got['GIL']:.2f}x")


def tensor_count(rounds: int = 3, scratch: Path = Path("/var/tmp")) -> None:
    """The same bytes as the real job's state dict (2,320 tensors: AdamW keeps step, m and v per parameter) and as
    DeepSpeed holds them (the optimizer's m and v as flat partitions: 582; studyctl's `state: torch` holds the
    job's count, `state_pair`), saved and loaded cold with DCP, alternating: what the tensor count alone costs."""
    import shutil
    import tempfile

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from benchmarks.engines_direct import drop_pages
    from benchmarks.real_training import SHAPES, Job, files

    torch.set_num_threads(1)
    job = Job(torch, SHAPES["cpu"], "cpu")
    job.steps(1)
    real = job.state()
    moments = [s for s in real["optim"]["state"].values()]
    flat = {"model": real["model"], "optim": {k: torch.cat([m[k].flatten() for m in moments])
                                              for k in ("exp_avg", "exp_avg_sq")}}
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29400 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    got: dict[str, list[float]] = {}
    root = Path(tempfile.mkdtemp(prefix="tensor-count-", dir=scratch))
    try:
        for r in range(rounds):
            for name, state in (("real", real), ("flat", flat)) if r % 2 == 0 else (("flat", flat), ("real", real)):
                d = root / f"{name}{r}"
                start = time.perf_counter()
                dcp.save(state, storage_writer=dcp.FileSystemWriter(d, thread_count=1))
                got.setdefault(f"{name} save", []).append(time.perf_counter() - start)
                drop_pages([Path(p) for p in files(d)])
                start = time.perf_counter()
                dcp.load(state, storage_reader=dcp.FileSystemReader(d))
                got.setdefault(f"{name} load", []).append(time.perf_counter() - start)
                shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        dist.destroy_process_group()
    count = {"real": len(real["model"]) + 3 * len(moments), "flat": len(real["model"]) + 2}
    print(f"# DCP and the tensor count (same bytes, load {os.getloadavg()[0]:.1f}): " + "; ".join(
        f"{what}: {count['real']} tensors {statistics.median(got['real ' + what]):.2f} s, {count['flat']} tensors "
        f"{statistics.median(got['flat ' + what]):.2f} s" for what in ("save", "load")))


def _save_parts(torch: Any, state: dict[str, Any], d: Path) -> None:
    for key, part in state.items():
        torch.save(part, d / f"{key}.pt")


def state_pair(rounds: int = 3, scratch: Path = Path("/var/tmp"), shape_name: str = "cpu") -> None:
    """The real job's state dict against studyctl's `state: torch` tensors of the same model (its plan, allocated as
    the worker allocates it), in one process, alternating: DCP save and cold load, and torch.save of the two files
    to paths, wall and process CPU seconds. What is left of the engine figures' gap once the processes, the
    storage stream and the load are the same: the tensors' count, names, nesting and sizes alone."""
    import shutil
    import tempfile
    from dataclasses import replace

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from benchmarks.engines_direct import drop_pages
    from benchmarks.real_training import POSITIONS, SHAPES, VOCAB, Job, files
    from studyctl.definition.checkpoint.engine_tensors import file_tensors
    from studyctl.definition.checkpoint.layout import Convention, Parallelism
    from studyctl.definition.inputs.catalog import CATALOG
    from worker.engines.state import RankState

    torch.set_num_threads(1)
    shape = SHAPES[shape_name]
    job = Job(torch, shape, "cpu")
    job.steps(1)
    real = job.state()
    m = replace(CATALOG["gpt2-1.5b"], num_layers=shape.n_layer, hidden_size=shape.n_embd,
                ffn_hidden_size=4 * shape.n_embd, num_attention_heads=shape.n_head, num_kv_heads=shape.n_head,
                vocab_size=VOCAB, position_embeddings=POSITIONS)
    ours_state = RankState(file_tensors(m, Parallelism(1, 1, 1, 0), 0, conv=Convention("torch")),
                           torch.device("cpu"), 0)
    ours_state.allocate()
    ours = ours_state.by_kind()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29400 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    got: dict[str, list[tuple[float, float]]] = {}

    def timed(key: str, fn: Callable[[], object]) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        got.setdefault(key, []).append((time.perf_counter() - wall, time.process_time() - cpu))

    root = Path(tempfile.mkdtemp(prefix="state-pair-", dir=scratch))
    try:
        for r in range(rounds):
            for name, state in (("real", real), ("studyctl", ours)) if r % 2 == 0 else (
                    ("studyctl", ours), ("real", real)):
                d = root / f"{name}{r}"
                timed(f"{name} dcp save", partial(dcp.save, state,
                                                  storage_writer=dcp.FileSystemWriter(d, thread_count=1)))
                drop_pages([Path(p) for p in files(d)])
                timed(f"{name} dcp load", partial(dcp.load, state, storage_reader=dcp.FileSystemReader(d)))
                shutil.rmtree(d)
                d.mkdir()
                timed(f"{name} torch.save", partial(_save_parts, torch, state, d))
                shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        dist.destroy_process_group()
    print(f"# the same calls on the real state dict and on studyctl's tensors, one process, {rounds} alternating "
          f"rounds (load {os.getloadavg()[0]:.1f}): " + "; ".join(
              f"{what}: real {statistics.median(w for w, _ in got['real ' + what]):.2f} s wall / "
              f"{statistics.median(c for _, c in got['real ' + what]):.2f} s CPU, studyctl "
              f"{statistics.median(w for w, _ in got['studyctl ' + what]):.2f} / "
              f"{statistics.median(c for _, c in got['studyctl ' + what]):.2f}"
              for what in ("dcp save", "dcp load", "torch.save")))


def lost_beside_async_save(rounds: int = 3, scratch: Path = Path("/var/tmp")) -> None:
    """The compute a DCP async_save of the real job's state costs the steps beside it, for the real step and for
    `compute: cpu` at the real step's time with no dispatch (the model before it had one) and with its default
    share, in one process, alternating, each stager of the CPU job: lost = sum(steps during) - n x idle (idle steps
    right before and after), as `real_training` and the worker take it; wall and process CPU seconds."""
    import shutil
    import tempfile

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

    from benchmarks.real_training import IDLE_STEPS, NO_STAGING_OPTIONS, SHAPES, STAGERS, Job
    from studyctl.definition.inputs.training import CPU_DISPATCH_SHARE
    from worker.compute import HostCompute

    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29300 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    job = Job(torch, SHAPES["cpu"], "cpu")
    job.steps(3)
    state = job.state()
    idle = statistics.median(job.steps(8))
    steps: dict[str, Callable[[], object]] = {"real step": job.step}
    for share in (0.0, CPU_DISPATCH_SHARE):
        model = HostCompute(idle, share)
        model.calibrate()
        steps[f"compute cpu, share {share:.2f}"] = model.run

    def timed(step: Callable[[], object]) -> float:
        start = time.perf_counter()
        step()
        return time.perf_counter() - start

    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    load = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="lost-beside-", dir=scratch))
    try:
        for r in range(rounds):
            for stager_name, options in STAGERS["cpu"].items():
                for name, step in list(steps.items())[::1 if r % 2 == 0 else -1]:
                    before = [timed(step) for _ in range(IDLE_STEPS)]
                    stager = DefaultStager(StagingOptions(**{**NO_STAGING_OPTIONS, **options}))
                    start = time.perf_counter()
                    response: Any = dcp.async_save(state, storage_writer=dcp.FileSystemWriter(
                        root / f"{r}-{stager_name}-{list(steps).index(name)}", thread_count=1), async_stager=stager)
                    upload: Any = getattr(response, "upload_completion", response)
                    during = []
                    while not upload.done():
                        during.append(timed(step))
                    upload.result()
                    persist = time.perf_counter() - start
                    after = [timed(step) for _ in range(IDLE_STEPS)]
                    stager.close()
                    lost = math.fsum(during) - len(during) * statistics.fmean(before + after)
                    got.setdefault((stager_name, name), []).append((lost, persist))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        dist.destroy_process_group()
    print(f"# compute lost beside a DCP async_save of the real state ({rounds} alternating rounds, idle step "
          f"{idle:.3f} s, load {load:.1f} -> {os.getloadavg()[0]:.1f}; median lost s / persist s): " + "; ".join(
              f"{stager} {name} {statistics.median(x for x, _ in v):.2f} / {statistics.median(p for _, p in v):.2f}"
              for (stager, name), v in got.items()))


Timed = tuple[float, float, int]  # wall s, process CPU s, minor page faults of one call


def alternating(ways: dict[str, Callable[[], object]], rounds: int, before: Callable[[], object]
                ) -> dict[str, list[Timed]]:
    """Each way timed once a round, the order reversed every other round, `before` run off the clock ahead of each
    (the pages evicted): the same process's ways side by side."""
    import resource

    got: dict[str, list[Timed]] = {}
    for r in range(rounds):
        for name, way in list(ways.items())[::1 if r % 2 == 0 else -1]:
            before()
            wall, cpu = time.perf_counter(), time.process_time()
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            way()
            got.setdefault(name, []).append((time.perf_counter() - wall, time.process_time() - cpu,
                                             resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults))
    return got


def read_streams(rounds: int = 6, scratch: Path = Path("/var/tmp")) -> None:
    """Cold torch.load of the real job's two files (model, optimizer) by path, as the job loads them, against the
    same loads through the torch_save engine's read stream (`local_read_stream`: buffered as `open()` buffers) and
    through the stream as it was before (a 16 MiB buffer, the point's I/O block), in one process, alternating:
    wall and process CPU seconds."""
    import io as stdio
    import shutil
    import tempfile

    import torch

    from benchmarks.engines_direct import drop_pages, fsync
    from benchmarks.real_training import SHAPES, Job
    from worker import io
    from worker.storage.posix import local_read_stream

    torch.set_num_threads(1)
    job = Job(torch, SHAPES["cpu"], "cpu")
    job.steps(1)
    root = Path(tempfile.mkdtemp(prefix="read-streams-", dir=scratch))
    paths = [root / f"{part}.pt" for part in ("model", "optim")]
    for path, part in zip(paths, job.state().values(), strict=True):
        torch.save(part, path)
        fsync(path)
    opens: dict[str, Callable[[Path], Any]] = {
        "torch.load(path)": lambda p: p,
        "engine stream": lambda p: local_read_stream(str(p), io.Split()),
        "16 MiB buffer (before)": lambda p: stdio.BufferedReader(stdio.FileIO(p), 16 << 20)}
    load = os.getloadavg()[0]
    try:
        got = alternating({name: partial(_load_all, torch, paths, opened) for name, opened in opens.items()},
                          rounds, partial(drop_pages, paths))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"# cold torch.load of the real job's files ({rounds} alternating rounds, load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; median wall / CPU s): " + "; ".join(
              f"{name} {statistics.median(w for w, _, _ in v):.3f} / {statistics.median(c for _, c, _ in v):.3f}"
              for name, v in got.items()))


def _load_all(torch: Any, paths: list[Path], opened: Callable[[Path], Any]) -> None:
    for path in paths:
        torch.load(opened(path), map_location="cpu", weights_only=True)


def restore_pair(rounds: int = 4, scratch: Path = Path("/var/tmp")) -> None:
    """A job's cold restore and the torch_save engine's, in one process, alternating, so that both get memory
    alike (across processes, what memory each is handed decides: `benchmarks/page_reuse.py`): the real job's two
    files torch.loaded by path into `load_state_dict`, the same through the engine's read stream, and the engine's
    restore of studyctl's `state: torch` files of the same model into an allocated state; wall, process CPU
    seconds and minor faults."""
    import shutil
    import tempfile
    from dataclasses import replace

    import torch

    from benchmarks.engines_direct import drop_pages
    from benchmarks.real_training import POSITIONS, SHAPES, VOCAB, Job
    from studyctl.definition.checkpoint.engine_tensors import file_tensors
    from studyctl.definition.checkpoint.layout import Convention, Parallelism
    from studyctl.definition.inputs.catalog import CATALOG
    from worker import io
    from worker.engines import EngineOptions, make_engine
    from worker.storage.posix import local_read_stream

    class OneRank:
        def Get_rank(self) -> int:  # mpi4py's name
            return 0

    torch.set_num_threads(1)
    shape = SHAPES["cpu"]
    job = Job(torch, shape, "cpu")
    job.steps(1)
    model = replace(CATALOG["gpt2-1.5b"], num_layers=shape.n_layer, hidden_size=shape.n_embd,
                    ffn_hidden_size=4 * shape.n_embd, num_attention_heads=shape.n_head, num_kv_heads=shape.n_head,
                    vocab_size=VOCAB, position_embeddings=POSITIONS)
    plan = file_tensors(model, Parallelism(1, 1, 1, 0), 0, conv=Convention("torch"))
    root = Path(tempfile.mkdtemp(prefix="restore-pair-", dir=scratch))
    opts = EngineOptions(engine="torch_save", state="torch")
    engine = make_engine(opts, plan, lambda step: root / f"step{step}", OneRank())
    engine.allocate()
    into = make_engine(opts, plan, lambda step: root / f"step{step}", OneRank()).state
    into.allocate(fill=False)
    engine.save(0)
    (root / "job").mkdir()
    paths = [root / "job" / f"{part}.pt" for part in ("model", "optim")]
    for path, part in zip(paths, job.state().values(), strict=True):
        torch.save(part, path)
    evicted = paths + [root / "step0" / f.file.name for f in plan]

    def by_path() -> None:
        for path, owner in zip(paths, (job.model, job.optimizer), strict=True):
            owner.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))

    def by_stream() -> None:
        for path, owner in zip(paths, (job.model, job.optimizer), strict=True):
            with local_read_stream(str(path), io.Split()) as stream:
                owner.load_state_dict(torch.load(stream, map_location="cpu", weights_only=True))

    ways: dict[str, Callable[[], object]] = {"job, torch.load(path)": by_path, "job, engine stream": by_stream,
                                             "engine restore": partial(engine.load, 0, into)}
    load = os.getloadavg()[0]
    try:
        got = alternating(ways, rounds, partial(drop_pages, evicted))
    finally:
        engine.close()
        shutil.rmtree(root, ignore_errors=True)
    print(f"# cold restores in one process ({rounds} alternating rounds, load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; median wall s / CPU s / minor faults): " + "; ".join(
              f"{name} {statistics.median(w for w, _, _ in v):.3f} / {statistics.median(c for _, c, _ in v):.3f} / "
              f"{statistics.median(f for _, _, f in v):,.0f}" for name, v in got.items()))


def main(repeat: int = 2, out: Path | None = None) -> None:
    print(f"\n## A real CPU training job's checkpoints vs studyctl (`python -m benchmarks engines_cpu {repeat}`)")
    sensitivity()
    engines_check.main(repeat, "cpu", out)
    tensor_count()
    state_pair()
    read_streams()
    restore_pair()
    lost_beside_async_save()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2, Path(sys.argv[2]) if len(sys.argv) > 2 else None)
