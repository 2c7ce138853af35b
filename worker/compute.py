"""A simulated training step: compute, then a gradient all-reduce over MPI that also votes on when to stop.

Two compute models, chosen in the sweep (`training.simulated_step.compute`):
- accelerator (default): the node trains on accelerators and its framework dispatches from Python, as an eager
  PyTorch loop does. A step is the rank's host thread dispatching the step's work (Dispatch: many small
  Python-level ops holding the GIL and a core, the GIL dropped at each launch as torch's bindings drop it around
  each op, for `dispatch_share` of an idle step, calibrated on the idle rank) while its device runs what was
  launched behind it (DeviceQueue: each launch queues its part of the step's device work), then the wait for the
  device to finish (a sleep, which holds no core and releases the GIL). With `device: cuda` the device work is
  real GPU work (matmuls sized by calibration) launched from that thread at the dispatch's launches, then
  `torch.cuda.synchronize()`.
- cpu: the node trains on its own CPUs with an eager framework (a PyTorch loop on host tensors). A step is the
  same dispatch (`dispatch_share` of the step: the framework's Python between its kernels, holding the GIL
  between launches), then the kernels' part for the rest: BLAKE2 hashing of an in-memory array, which runs at
  memory and CPU speed on the rank's core and releases the GIL, as torch's CPU kernels do. A persist's Python
  (DCP's writer and stager threads) then takes turns with the dispatch for the GIL, and its copies take the cores
  from the kernels.

Why a queue: on a GPU the host launches kernels and the device runs them behind it, so a step's host and device
time overlap, and an idle GPU-bound step is as long as its device work. The host's lead over the device grows as
it issues faster than the device runs: a host stall (waiting for the GIL or a core) shorter than that lead costs
the step nothing, a longer one leaves the device idle for the difference and delays the step by as much. The
default share (0.25) is measured (`python -m benchmarks dispatch_share`: the host time of an eager GPT-2 XL step,
bf16 autocast and fused AdamW, over the H200's 0.378 s step); the GPU check measured a GPT-2 medium step on the
H200 launched by its host in 0.61 of its 0.075 s (a smaller model's step is shorter on the device, not on the
host). What it lets a background persist cost: the persist's Python (serialization, a stager's or writer's
thread) takes the GIL from the dispatch, and on a node with no free core its copies take the core; the device
meanwhile runs what it was given. Because the dispatch drops the GIL at every launch, a writer thread waiting
between two system calls gets it within microseconds (measured beside a real torch op loop: the same wait as
beside an idle thread), not at the interpreter's 5 ms switch interval; a dispatch that held it throughout made
DCP's writer 1.5x slower than beside a real GPU step (the GPU check).
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
# A launch every 16 Python-level ops (~8 µs of host time here; one eager torch op costs its host ~20 µs) drops the
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
    briefly (a writer between its system calls) gets it at the next launch, microseconds away, not at the
    interpreter's switch interval, and one that takes it there holds the dispatch up until it gives it back, as it
    holds up a real framework's. Calibrated in thread CPU time, which load does not stretch."""

    def __init__(self) -> None:
        self.handlers = dict.fromkeys(_OP_KINDS, _launch)
        self.ops = 0
        self.launch_args = memoryview(bytes(LAUNCH_BYTES))

    def run(self, ops: int, on_launch: Callable[[], None] | None = None) -> int:
        """Dispatch `ops` ops, calling `on_launch` at each launch (the device's work queued); returns how many."""
        handlers, kinds, queue = self.handlers, _OP_KINDS, []
        launch, args = hashlib.blake2b, self.launch_args
        for i in range(ops):
            kind = kinds[i % 10]
            queue.append(handlers[kind](kind, i))
            if len(queue) == OPS_PER_LAUNCH:  # the launch: the GIL dropped, the device takes the queued work
                launch(args)
                if on_launch is not None:
                    on_launch()
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


class DeviceQueue:
    """A device running what its host launched, in launch order, behind the host: each launch queues `per_launch`
    seconds of device work, which starts once the launch has happened and the device is free. The host runs ahead
    of the device by the queue's lead, so a host stall shorter than the lead costs the step nothing and a longer one
    leaves the device idle for the difference (a GPU's stream; the lead grows over the dispatch as the host issues
    faster than the device runs)."""

    def __init__(self, per_launch: float) -> None:
        self.per_launch = per_launch
        self.free_at = 0.0  # when the device has run everything launched so far (perf_counter seconds)

    def launch(self, now: float, work_s: float | None = None) -> None:
        self.free_at = max(self.free_at, now) + (self.per_launch if work_s is None else work_s)


class DeviceCompute:
    """compute accelerator: the step's dispatch on this thread (`dispatch_share` of `compute_s`), each launch
    queueing its part of the step's device work (the whole step's: an idle step is as long as its device work,
    which the host's dispatch runs ahead of), then the wait for the device to finish, holding no core. A dispatch
    stretched by a background persist delays the step only where it outruns the queue's lead."""

    def __init__(self, compute_s: float, dispatch_share: float) -> None:
        self.compute_s = compute_s
        self.dispatch_share = dispatch_share
        self.dispatch = Dispatch()
        self.device_s = compute_s
        self.queue = DeviceQueue(0.0)

    @property
    def launches(self) -> int:
        return self.dispatch.ops // OPS_PER_LAUNCH

    def calibrate(self) -> None:
        self.dispatch.calibrate(self.compute_s * self.dispatch_share)
        self.queue.per_launch = self.device_s / self.launches if self.launches else 0.0

    def run(self) -> None:
        self.dispatch.run(self.dispatch.ops, self._launch)
        if not self.launches:  # no dispatch to speak of: the step's device work queued at once
            self.queue.launch(time.perf_counter(), self.device_s)
        self.wait()

    def _launch(self) -> None:
        self.queue.launch(time.perf_counter())

    def wait(self) -> None:
        """Until the device has run what was launched: a sleep, holding neither the GIL nor a core."""
        time.sleep(max(0.0, self.queue.free_at - time.perf_counter()))


class CudaCompute(DeviceCompute):
    """compute accelerator with `device: cuda`: the device work is real GPU work, bf16 matmuls on the rank's
    current device launched at the dispatch's launches (each launch the matmuls its share of the step owes), then a
    synchronize: the GPU's own stream is the queue. torch is imported only here."""

    SIZE = 4096  # a matmul of ~0.14 TFLOP: ~0.2 ms on an H100/H200, so the count sizes the step finely

    def __init__(self, compute_s: float, dispatch_share: float, device: Any = None, size: int = SIZE) -> None:
        """`device` and `size` other than the GPU's own and SIZE only for a test of the launching on host tensors."""
        super().__init__(compute_s, dispatch_share)
        import torch

        self.torch = torch
        self.device = device if device is not None else torch.device("cuda", torch.cuda.current_device())
        self.a = torch.randn(size, size, device=self.device, dtype=torch.bfloat16)
        self.out = torch.empty_like(self.a)
        self.matmul_s = 0.0
        self.owed = 0.0  # device seconds launched work still owes the step (less than one matmul)
        self.launched = 0  # matmuls launched in the last step

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _matmuls(self, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            self.torch.mm(self.a, self.a, out=self.out)
        self._synchronize()
        return time.perf_counter() - start

    def calibrate(self) -> None:
        super().calibrate()
        self._matmuls(10)  # warm: cuBLAS's handle and kernel choice
        self.matmul_s = max(min(self._matmuls(20) for _ in range(3)) / 20, 1e-9)

    def _launch(self) -> None:
        self.owed += self.queue.per_launch
        while self.owed >= self.matmul_s:
            self.torch.mm(self.a, self.a, out=self.out)
            self.owed -= self.matmul_s
            self.launched += 1

    def run(self) -> None:
        self.owed, self.launched = 0.0, 0
        self.dispatch.run(self.dispatch.ops, self._launch)
        if not self.launches:
            self.launched = max(1, round(self.device_s / self.matmul_s))
            self._matmuls(self.launched)
        self.wait()

    def wait(self) -> None:
        """Until the GPU has run what was launched: its stream is the queue."""
        self._synchronize()


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
