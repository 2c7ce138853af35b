"""A simulated training step: compute, then a gradient all-reduce over MPI that also votes on when to stop.

Two compute models, chosen in the sweep (`training.simulated_step.compute`):
- accelerator (default): the node trains on accelerators and its framework dispatches from Python, as an eager
  PyTorch loop does. A step is the rank's host thread dispatching the step's work (Dispatch: many small
  Python-level ops holding the GIL and a core, the GIL dropped at each launch as torch's bindings drop it around
  each op, for `dispatch_share` of an idle step, calibrated on the idle rank), then waiting on its device for the
  rest (a sleep, which holds no core and releases the GIL). With `device: cuda` the rest is real GPU work launched
  from that thread (matmuls sized by calibration), then `torch.cuda.synchronize()`.
- cpu: the node trains on its own CPUs with an eager framework (a PyTorch loop on host tensors). A step is the
  same dispatch (`dispatch_share` of the step: the framework's Python between its kernels, holding the GIL
  between launches), then the kernels' part for the rest: BLAKE2 hashing of an in-memory array, which runs at
  memory and CPU speed on the rank's core and releases the GIL, as torch's CPU kernels do. A persist's Python
  (DCP's writer and stager threads) then takes turns with the dispatch for the GIL, and its copies take the cores
  from the kernels.

Why dispatch, then the rest, and not the two overlapped: on a GPU the kernel queue lets the device run behind the
host, so a step's host and device time overlap. But the device cannot run a kernel before the host has launched
it: wherever the step's kernels are shorter than their launches (an eager step's many small element-wise,
norm and cast ops), the device waits on the host, and a host that waits for the GIL or a core delays the step
one for one. The model takes the dispatch share as that host-bound part, so a stretched dispatch delays the step
by as much, and the device's own part (the rest) is unchanged. A real queue can absorb a short stall where it
runs ahead (the model overstates a stall shorter than that lead) and cannot absorb one longer. The default share
(0.25) is measured (`python -m benchmarks dispatch_share`: the host time of an eager GPT-2 XL step, bf16
autocast and fused AdamW, over the H200's 0.378 s step). What it lets a background persist cost: the persist's
Python (serialization, a stager's or writer's thread) takes the GIL from the dispatch, and on a node with no
free core its copies take the core; the device's part meanwhile runs on. Because the dispatch drops the GIL at
every launch, a writer thread waiting between two system calls gets it within microseconds (measured beside a real
torch op loop: the same wait as beside an idle thread), not at the interpreter's 5 ms switch interval; a dispatch
that held it throughout made DCP's writer 1.5x slower than beside a real GPU step (the GPU check).
The cpu step's default (0.20) is measured the same way on the engine check's real CPU job
(`dispatch_share.cpu_share`: the graph's dispatch on tiny tensors over its fp32 step, both in thread CPU time).

Every step ends with an MPI_Allreduce (SUM) of `allreduce_mib` per rank on the world communicator, so
under Slurm it crosses real nodes. Its last element is each rank's "my background work is done" flag:
a step's all-reduce tells every rank at once whether all are done, so every rank runs the same number
of all-reduces and stops on the same step. Only the main thread calls MPI.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from studyctl.definition.checkpoint.points import CALIBRATION_STEPS
from studyctl.definition.inputs.training import DISPATCH_SHARES
from studyctl.units import MIB

ARRAY_BYTES = 4 << 20  # larger than a core's cache: memory traffic, like a real step's


# One dispatched op: the kinds an eager step's host code walks through (names only: a dict lookup per op).
_OP_KINDS = ("linear", "to_copy", "layer_norm", "add", "gelu", "dropout", "sdpa", "view", "transpose", "mul")
_CALIBRATION_OPS = 20_000
# A launch every 16 Python-level ops (~10 µs of host time here, what one eager torch op costs its host) drops the
# GIL for a hash of 2 KiB: CPython's hashlib releases the GIL from 2,048 bytes (HASHLIB_GIL_MINSIZE), ~1-2 µs.
OPS_PER_LAUNCH = 16
LAUNCH_BYTES = 2048


class _Launch:
    """What one dispatched op leaves behind on the host: a small object, like a framework's tensor wrapper."""

    __slots__ = ("kind", "shape", "stream")

    def __init__(self, kind: str, shape: tuple[int, int], stream: int) -> None:
        self.kind, self.shape, self.stream = kind, shape, stream


def _launch(kind: str, i: int) -> _Launch:
    return _Launch(kind, (i & 63, 1600), i & 7)


class Dispatch:
    """A framework's host dispatch: `ops` small Python-level ops (lookup, call, allocation, a queue append) holding
    the GIL, and every OPS_PER_LAUNCH of them a launch: a short C call that drops the GIL and holds the core (a
    kernel launch in the driver, as torch's bindings drop the GIL around each op). So a thread that wants the GIL
    briefly (a writer between its system calls) gets it at the next launch, tens of microseconds away, not at the
    interpreter's switch interval, and a thread that holds it stalls the dispatch at every launch, as it stalls a
    real framework's. Calibrated in thread CPU time, which load does not stretch."""

    def __init__(self) -> None:
        self.handlers = dict.fromkeys(_OP_KINDS, _launch)
        self.ops = 0
        self.launch_args = memoryview(bytes(LAUNCH_BYTES))

    def run(self, ops: int) -> int:
        """Dispatch `ops` ops; returns how many (the count a test can check)."""
        handlers, kinds, queue = self.handlers, _OP_KINDS, []
        launch, args = hashlib.blake2b, self.launch_args
        for i in range(ops):
            kind = kinds[i % 10]
            queue.append(handlers[kind](kind, i))
            if len(queue) == OPS_PER_LAUNCH:  # the launch: the GIL dropped, the device takes the queued work
                launch(args)
                queue.clear()
        return ops

    def calibrate(self, host_s: float) -> None:
        """The ops that take `host_s` of this thread's CPU time on an idle rank (0 for none)."""
        if host_s <= 0:
            self.ops = 0
            return
        self.run(_CALIBRATION_OPS)  # warm the code

        def one() -> float:
            start = time.thread_time()
            self.run(_CALIBRATION_OPS)
            return time.thread_time() - start

        per_op = min(one() for _ in range(3)) / _CALIBRATION_OPS
        self.ops = max(1, round(host_s / max(per_op, 1e-9)))


class HostCompute:
    """compute cpu: the step's dispatch on this thread (`dispatch_share` of `compute_s`, holding the GIL), then its
    kernels for the rest: hashing on the same core, the GIL released; both calibrated on an idle rank."""

    def __init__(self, compute_s: float, dispatch_share: float) -> None:
        self.compute_s = compute_s
        self.dispatch_share = dispatch_share
        self.dispatch = Dispatch()
        self.kernel_s = compute_s * (1.0 - dispatch_share)
        self.data = memoryview(bytearray(os.urandom(ARRAY_BYTES)))
        self.passes = 0

    def _kernels(self, passes: int) -> float:
        start = time.perf_counter()
        for _ in range(passes):
            hashlib.blake2b(self.data).digest()
        return time.perf_counter() - start

    def calibrate(self) -> None:
        self.dispatch.calibrate(self.compute_s * self.dispatch_share)
        self._kernels(1)  # warm the array and the code
        one = min(self._kernels(1) for _ in range(3))
        self.passes = round(self.kernel_s / max(one, 1e-6)) if self.kernel_s > 0 else 0

    def kernels(self) -> None:
        """The kernels' part: the GIL released, a core held."""
        self._kernels(self.passes)

    def run(self) -> None:
        self.dispatch.run(self.dispatch.ops)
        self.kernels()


class DeviceCompute:
    """compute accelerator: the step's dispatch on this thread (`dispatch_share` of `compute_s`), then the wait on
    the device for the rest, holding no core."""

    def __init__(self, compute_s: float, dispatch_share: float) -> None:
        self.compute_s = compute_s
        self.dispatch_share = dispatch_share
        self.dispatch = Dispatch()
        self.device_s = compute_s * (1.0 - dispatch_share)

    def calibrate(self) -> None:
        self.dispatch.calibrate(self.compute_s * self.dispatch_share)

    def run(self) -> None:
        start = time.perf_counter()
        self.dispatch.run(self.dispatch.ops)
        self.wait(start)

    def wait(self, start: float | None = None) -> None:
        """The device's part after the dispatch; a step never ends before `compute_s` from `start` (its dispatch
        calibrated on the fastest of three runs may come in under its share), while a stretched dispatch still
        delays the step one for one."""
        until = time.perf_counter() + self.device_s
        if start is not None:
            until = max(until, start + self.compute_s)
        time.sleep(max(0.0, until - time.perf_counter()))


class CudaCompute(DeviceCompute):
    """compute accelerator with `device: cuda`: the rest of the step is real GPU work (bf16 matmuls on the
    rank's current device, launched from this thread), then a synchronize; torch is imported only here."""

    SIZE = 4096  # a matmul of ~0.14 TFLOP: ~0.2 ms on an H100/H200, so the count sizes the step finely

    def __init__(self, compute_s: float, dispatch_share: float) -> None:
        super().__init__(compute_s, dispatch_share)
        import torch

        self.torch = torch
        self.a = torch.randn(self.SIZE, self.SIZE, device=torch.device("cuda", torch.cuda.current_device()),
                             dtype=torch.bfloat16)
        self.out = torch.empty_like(self.a)
        self.matmuls = 1

    def _matmuls(self, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            self.torch.mm(self.a, self.a, out=self.out)
        self.torch.cuda.synchronize()
        return time.perf_counter() - start

    def calibrate(self) -> None:
        super().calibrate()
        self._matmuls(10)  # warm: cuBLAS's handle and kernel choice
        one = min(self._matmuls(20) for _ in range(3)) / 20
        self.matmuls = max(1, round(self.device_s / max(one, 1e-9)))

    def wait(self, start: float | None = None) -> None:
        self._matmuls(self.matmuls)


def device_compute(compute_s: float, dispatch_share: float, device: str) -> DeviceCompute:
    """The accelerator step for where the point's state lives: a simulated device on `cpu`, the GPU on `cuda`."""
    return CudaCompute(compute_s, dispatch_share) if device == "cuda" else DeviceCompute(compute_s, dispatch_share)


@dataclass
class Window:
    """Steps of one rank over a stretch of training: durations, and what the steps did."""

    steps: list[float]
    compute_wall_s: float = 0.0  # time in the compute part of the steps
    compute_cpu_s: float = 0.0  # CPU time the main thread used in it (accelerator: its dispatch; cpu: all of it)
    allreduce_bytes: int = 0  # gradient bytes this rank all-reduced


class Trainer:
    """One rank's simulated training loop (collective: every rank of `comm` steps together)."""

    def __init__(self, comm: Any, compute_s: float, model: str, allreduce_mib: float,
                 dispatch_share: float | None = None, device: str = "cpu") -> None:
        import numpy as np  # here, not at the top: a sync point's ranks never step and start without it
        from mpi4py import MPI

        self.comm = comm
        self.size = comm.Get_size()
        share = DISPATCH_SHARES[model] if dispatch_share is None else dispatch_share  # type: ignore[index]
        self.work: HostCompute | DeviceCompute = (
            HostCompute(compute_s, share) if model == "cpu" else device_compute(compute_s, share, device))
        self.grad_bytes = int(allreduce_mib * MIB) // 4 * 4
        # float32 gradients (zeros: a sum that stays finite), then the stop flag
        self.grads = np.zeros(self.grad_bytes // 4 + 1, dtype=np.float32)
        self.message = (MPI.IN_PLACE, [self.grads, MPI.FLOAT], MPI.SUM)
        self.baseline_s = compute_s

    def calibrate(self) -> None:
        """The compute model's own calibration, then the median of idle steps: the step with nothing beside it."""
        self.work.calibrate()
        self.baseline_s = statistics.median(self.run(CALIBRATION_STEPS).steps)

    def step(self, window: Window, done: Callable[[], bool] | None = None) -> bool:
        """One step into `window`; returns whether every rank's `done()` held when the step all-reduced."""
        start, cpu = time.perf_counter(), time.thread_time()
        self.work.run()
        window.compute_cpu_s += time.thread_time() - cpu
        window.compute_wall_s += time.perf_counter() - start
        self.grads[-1] = 1.0 if done is None or done() else 0.0
        self.comm.Allreduce(*self.message)
        window.allreduce_bytes += self.grad_bytes
        window.steps.append(time.perf_counter() - start)
        return bool(self.grads[-1] == self.size)

    def run(self, steps: int) -> Window:
        """`steps` steps on every rank (idle steps: nothing runs beside them)."""
        window = Window([])
        for _ in range(steps):
            self.step(window)
        return window

    def run_until(self, done: Callable[[], bool]) -> Window:
        """Steps until every rank's `done()` held at the same step's all-reduce; at least one."""
        window = Window([])
        while not self.step(window, done):
            pass
        return window
