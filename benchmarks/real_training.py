"""A real training job's checkpoints, timed as the job sees them: the reference the engine checks hold studyctl to.

    python -m benchmarks.real_training DIR OUT.json SHAPE   (SHAPE: a name of SHAPES; cuda when there)

A GPT-2-shaped model in plain torch (`benchmarks.dispatch_share.gpt2`: the parameters of transformers'
GPT2LMHeadModel, tied head, 1,024 learned positions) trains with AdamW (fused); on a GPU with bf16 autocast (AMP),
on the CPU in fp32 (no AMP, so the state is fp32 weights + Adam m, v: 12 B/param, studyctl's `state: torch`). Its
state dict {"model", "optim"} is then checkpointed the ways a user's job does it, on DIR's disk:

  torch.save    model and optimizer files, each fsynced (DeepSpeed's engine; torch's defaults: CRC-32 on)
  torch.load    the same files read back cold (pages dropped with fadvise, as studyctl drops them) into the
                model's and the optimizer's `load_state_dict`, as a job resumes
  dcp.save      `torch.distributed.checkpoint` with a FileSystemWriter (1 writer thread, files synced)
  dcp.load      into the live state, cold
  dcp async     `dcp.async_save` BESIDE REAL TRAINING STEPS, with each stager of STAGERS (a fresh one per save;
                "default" is DCP's own default, `NO_STAGING_OPTIONS`):
                training blocked until it returns; the persist until the files are complete; the steps that ran
                meanwhile against idle steps right before and after: lost compute = sum(during) - n x idle.

The files' lifecycle is a studyctl engine point's, whose figures these are held against: per way, `repeat`
checkpoints written and kept, then (sync ways) each restored cold, then all deleted. On a VM whose free memory is
handed back to its host (this project's machines: virtio-balloon free page reporting), a save into page-cache
pages freed a moment ago costs a fraction of one into memory that sat free (`benchmarks/page_reuse.py`), so the
two sides must free and reuse memory alike.

OUT.json is rewritten after every figure, so a run cut off returns what it measured. On the CPU the step runs on
`threads` intra-op threads (1 by default: on a shared, loaded machine OpenMP's barriers make a 2-thread step
several times slower, measured on the 2-core machine this was written on). Nothing of studyctl runs here.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.engines_direct import drop_pages, fsync  # a plain script's fsync and fadvise, as the reference's

VOCAB, POSITIONS = 50257, 1024  # GPT-2's


@dataclass(frozen=True)
class Shape:
    """A GPT-2-shaped model (plain MLP of 4 x hidden) and the batch one step trains on."""

    n_layer: int
    n_embd: int
    n_head: int
    batch: int
    seq: int


SHAPES: dict[str, Shape] = {
    "xl": Shape(48, 1600, 25, 8, 1024),  # GPT-2 XL as the H200 run trained it (1,557,611,200 parameters)
    "large": Shape(36, 1280, 20, 8, 1024),  # GPT-2 large (774,030,080 parameters): half XL's state, a smaller disk
    "medium": Shape(24, 1024, 16, 8, 1024),  # GPT-2 medium (~355 M parameters): a GPU check in a few minutes
    "cpu": Shape(48, 200, 25, 1, 16),  # XL's depth and heads, ~33 M parameters: a ~0.35 s step on one core
    "tiny": Shape(2, 128, 4, 1, 16),  # seconds end to end: the scripts' own test
}
# The async stagers each device runs: DCP's default (pageable, synchronous staging) and the best configured one
# (pinned memory needs a GPU; shared memory and async staging apply anywhere).
STAGERS: dict[str, dict[str, dict[str, bool]]] = {
    "cuda": {"default": {}, "pinned": {"use_pinned_memory": True, "use_shared_memory": True,
                                       "use_async_staging": True, "use_non_blocking_copy": True}},
    "cpu": {"default": {}, "shared+async": {"use_pinned_memory": False, "use_shared_memory": True,
                                            "use_async_staging": True, "use_non_blocking_copy": False}},
}
# DCP's default staging: what `dcp.async_save(state, checkpoint_id=...)` builds (the H200 figures' call, and the
# stager studyctl's `dcp` engine builds from a point's options). Passed explicitly: a FileSystemWriter handed to
# async_save without a stager would stage through its own BlockingAsyncStager, other code than that default.
NO_STAGING_OPTIONS = {"use_pinned_memory": False, "use_shared_memory": False, "use_async_staging": False,
                      "use_non_blocking_copy": False}
IDLE_STEPS = 6  # idle steps right before and right after each async save


class Job:
    """The model, its optimizer and one batch on `device`; `step()` is one eager training step, waited for."""

    def __init__(self, torch: Any, shape: Shape, device: str) -> None:
        from benchmarks.dispatch_share import gpt2

        self.torch, self.device = torch, device
        torch.manual_seed(0)
        with torch.device(device):
            self.model = gpt2(torch, shape.n_embd, VOCAB, POSITIONS, False, n_layer=shape.n_layer,
                              n_head=shape.n_head)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=True)
        self.params = sum(p.numel() for p in self.model.parameters())
        self.idx = torch.randint(0, VOCAB, (shape.batch, shape.seq), device=device)
        self.issued = 0.0

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def step(self) -> float:
        """One step (AMP bf16 on a GPU, fp32 on the CPU), its seconds; `self.issued` the seconds until the host had
        launched all of it (on a GPU its host side, the dispatch: the device runs behind it)."""
        start = time.perf_counter()
        if self.device == "cuda":
            with self.torch.autocast("cuda", dtype=self.torch.bfloat16):
                loss = self.model(self.idx)
        else:
            loss = self.model(self.idx)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.issued = time.perf_counter() - start
        self.sync()
        return time.perf_counter() - start

    def steps(self, n: int) -> list[float]:
        return [self.step() for _ in range(n)]

    def state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optim": self.optimizer.state_dict()}


def tensors(obj: Any, torch: Any) -> list[Any]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors(v, torch)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors(v, torch)]
    return []


def files(d: Path) -> list[str]:
    return sorted(p for p in glob.glob(f"{d}/**", recursive=True) if os.path.isfile(p))


def nbytes(paths: list[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


class Run:
    """The measurements of one job, recorded into OUT.json after each."""

    def __init__(self, root: Path, out: Path, shape_name: str, threads: int) -> None:
        import torch

        self.torch, self.root, self.out = torch, root, out
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.device == "cpu":
            torch.set_num_threads(threads)
        self.record: dict[str, Any] = {"steps": []}
        shape = SHAPES[shape_name]
        self.log("env", {"torch": torch.__version__, "device": self.device, "device_name": (
            torch.cuda.get_device_name(0) if self.device == "cuda" else "cpu"), "shape": shape_name, **asdict(shape),
            "threads": torch.get_num_threads(), "host_cores": len(os.sched_getaffinity(0)),
            "load_1min": os.getloadavg()[0]})
        started = time.perf_counter()
        self.job = Job(torch, shape, self.device)
        self.job.steps(3)  # warm: the optimizer's state exists, kernels chosen
        self.state = self.job.state()
        ts = tensors(self.state, torch)
        state_bytes = sum(t.numel() * t.element_size() for t in ts)
        self.log("model", {"params": self.job.params, "tensors": len(ts), "state_bytes": state_bytes,
                           "bytes_per_param": state_bytes / self.job.params,
                           "init_and_3_steps_s": time.perf_counter() - started})
        idle, issued = [], []
        for _ in range(10):
            idle.append(self.job.step())
            issued.append(self.job.issued)
        self.log("step_idle", {"mean_s": statistics.fmean(idle), "median_s": statistics.median(idle),
                               "min_s": min(idle), "max_s": max(idle), "issued_median_s": statistics.median(issued),
                               "host_share": statistics.median(issued) / statistics.median(idle)})

    def log(self, key: str, value: Any) -> None:
        self.record[key] = value
        self.record["steps"].append(key)
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1, default=str))
        tmp.replace(self.out)
        print(key, json.dumps(value, default=str), flush=True)

    def timed(self, fn: Callable[[], Any]) -> dict[str, float]:
        """Wall and CPU seconds of a call (the CPU the whole process spent in it, its threads included), and the
        page faults it took (minor: fresh memory touched, a cached page mapped)."""
        self.job.sync()
        start, cpu, faults = time.perf_counter(), time.process_time(), _minor_faults()
        fn()
        self.job.sync()
        return {"s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
                "minflt": _minor_faults() - faults}

    def torch_save(self, rep: int) -> None:
        """torch.save of model and optimizer, each file fsynced, then the directory (kept for `torch_load`)."""
        torch, d = self.torch, self.root / f"torch_save{rep}"
        d.mkdir(parents=True, exist_ok=True)
        paths = self.torch_paths(rep)

        def save() -> None:
            for path, part in zip(paths, ("model", "optim"), strict=True):
                torch.save(self.state[part], path)
                fsync(Path(path))
            fsync(d)

        took = self.timed(save)
        self.log(f"torch_save_{rep}", {"bytes": nbytes(paths), **took})

    def torch_paths(self, rep: int) -> list[str]:
        d = self.root / f"torch_save{rep}"
        return [str(d / "model.pt"), str(d / "optim.pt")]

    def torch_load(self, rep: int) -> None:
        """A cold restore of checkpoint `rep` as a job resumes: each file torch.loaded into its owner's
        `load_state_dict` (the model copies into its parameters, the optimizer keeps the loaded tensors)."""
        torch, job = self.torch, self.job
        paths = self.torch_paths(rep)
        drop_pages([Path(p) for p in paths])

        def load() -> None:
            for path, owner in zip(paths, (job.model, job.optimizer), strict=True):
                owner.load_state_dict(torch.load(path, map_location=self.device, weights_only=True))

        took = self.timed(load)
        self.state = job.state()  # the optimizer's state is now the loaded tensors
        self.log(f"torch_load_{rep}", {"bytes": nbytes(paths), **took})

    def dcp_sync(self, rep: int) -> None:
        """dcp.save through a FileSystemWriter (1 thread, files synced), kept for `dcp_load`."""
        import torch.distributed.checkpoint as dcp

        d = self.root / f"dcp_sync{rep}"
        took = self.timed(lambda: dcp.save(self.state, storage_writer=dcp.FileSystemWriter(d, thread_count=1)))
        paths = files(d)
        self.log(f"dcp_save_{rep}", {"bytes": nbytes(paths), "files": len(paths), **took})

    def dcp_load(self, rep: int) -> None:
        """A cold dcp.load of checkpoint `rep` into the live state."""
        import torch.distributed.checkpoint as dcp

        d = self.root / f"dcp_sync{rep}"
        paths = files(d)
        drop_pages([Path(p) for p in paths])
        took = self.timed(lambda: dcp.load(self.state, storage_reader=dcp.FileSystemReader(d)))
        self.log(f"dcp_load_{rep}", {"bytes": nbytes(paths), **took})

    def forget(self, prefix: str, repeat: int) -> None:
        """A way's checkpoints deleted once its restores are done, as a point deletes its steps at its end."""
        for rep in range(repeat):
            shutil.rmtree(self.root / f"{prefix}{rep}")

    def dcp_async(self, stager_name: str, rep: int) -> None:
        """dcp.async_save beside real steps (module docstring); staging and upload completions apart."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

        d = self.root / f"dcp_async_{stager_name}_{rep}"
        stager = DefaultStager(StagingOptions(**{**NO_STAGING_OPTIONS, **STAGERS[self.device][stager_name]}))
        before = self.job.steps(IDLE_STEPS)
        self.job.sync()
        start = time.perf_counter()
        response: Any = dcp.async_save(self.state, storage_writer=dcp.FileSystemWriter(d, thread_count=1),
                                       async_stager=stager)
        blocked = time.perf_counter() - start
        upload: Any = getattr(response, "upload_completion", response)
        staging: Any = getattr(response, "staging_completion", None)
        during: list[float] = []
        staged_at = blocked if staging is None else None
        while not upload.done():
            during.append(self.job.step())
            if staged_at is None and staging is not None and staging.done():
                staged_at = time.perf_counter() - start
        upload.result()
        done = time.perf_counter() - start
        after = self.job.steps(IDLE_STEPS)
        stager.close()
        idle = statistics.fmean(before + after)
        paths = files(d)
        self.log(f"dcp_async_{stager_name}_{rep}", {
            "bytes": nbytes(paths), "blocked_s": blocked, "staged_s": staged_at, "persist_s": done - blocked,
            "done_s": done, "steps_during": len(during), "step_during_mean_s": statistics.fmean(during) if during
            else None, "idle_step_s": idle, "idle_before_s": statistics.fmean(before),
            "idle_after_s": statistics.fmean(after), "lost_compute_s": sum(during) - len(during) * idle})


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main(root: str, out: str, shape: str = "cpu", repeat: int = 1, threads: int = 1) -> dict[str, Any]:
    import torch.distributed as dist

    Path(root).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    run = Run(Path(root), Path(out), shape, threads)
    dist.init_process_group("cpu:gloo,cuda:nccl" if run.device == "cuda" else "gloo", rank=0, world_size=1)
    try:
        for name, saves, loads in (("torch_save", run.torch_save, run.torch_load),
                                   ("dcp_sync", run.dcp_sync, run.dcp_load)):
            for rep in range(repeat):
                saves(rep)
            for rep in range(repeat):
                loads(rep)
            run.forget(name, repeat)
        for stager in STAGERS[run.device]:
            for rep in range(repeat):
                run.dcp_async(stager, rep)
            run.forget(f"dcp_async_{stager}_", repeat)
        run.log("done", True)
    finally:
        dist.destroy_process_group()
    return run.record


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], args[2] if len(args) > 2 else "cpu", *(int(a) for a in args[3:5]))
