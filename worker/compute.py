"""A simulated training step: compute, then a gradient all-reduce over MPI that also votes on when to stop.

Two compute models, chosen in the sweep (`training.simulated_step.compute`):
- accelerator (default): the node trains on accelerators. The rank's host thread only waits while its
  device computes (a sleep: it holds no host core and releases the GIL), as a training loop's host
  thread waits on a GPU kernel. A background persist or drain then competes with training for what it
  competes for on such a node: memory bandwidth, the network (the all-reduce) and the copy, not cores.
- cpu: CPU-side work. BLAKE2 hashing of an in-memory array, calibrated to `compute_s`; it runs at
  memory and CPU speed and releases the GIL, so a persist thread really runs beside it on the cores.

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

from studyctl.definition.points import CALIBRATION_STEPS
from studyctl.units import MIB

ARRAY_BYTES = 4 << 20  # larger than a core's cache: memory traffic, like a real step's


class HostCompute:
    """compute cpu: a busy loop on a host core, calibrated to `compute_s` on an idle rank."""

    def __init__(self, compute_s: float) -> None:
        self.compute_s = compute_s
        self.data = memoryview(bytearray(os.urandom(ARRAY_BYTES)))
        self.passes = 1

    def _run(self, passes: int) -> float:
        start = time.perf_counter()
        for _ in range(passes):
            hashlib.blake2b(self.data).digest()
        return time.perf_counter() - start

    def calibrate(self) -> None:
        self._run(1)  # warm the array and the code
        one = min(self._run(1) for _ in range(3))
        self.passes = max(1, round(self.compute_s / max(one, 1e-6)))

    def run(self) -> None:
        self._run(self.passes)


class DeviceCompute:
    """compute accelerator: the host thread waits `compute_s` for its device, holding no core."""

    def __init__(self, compute_s: float) -> None:
        self.compute_s = compute_s

    def calibrate(self) -> None:
        pass

    def run(self) -> None:
        time.sleep(self.compute_s)


@dataclass
class Window:
    """Steps of one rank over a stretch of training: durations, and what the steps did."""

    steps: list[float]
    compute_wall_s: float = 0.0  # time in the compute part of the steps
    compute_cpu_s: float = 0.0  # CPU time the main thread used in it (near 0 for accelerator compute)
    allreduce_bytes: int = 0  # gradient bytes this rank all-reduced


class Trainer:
    """One rank's simulated training loop (collective: every rank of `comm` steps together)."""

    def __init__(self, comm: Any, compute_s: float, model: str, allreduce_mib: float) -> None:
        import numpy as np  # here, not at the top: a sync point's ranks never step and start without it
        from mpi4py import MPI

        self.comm = comm
        self.size = comm.Get_size()
        self.work = HostCompute(compute_s) if model == "cpu" else DeviceCompute(compute_s)
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
