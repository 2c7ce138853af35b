"""The simulated step's host side, with real threads: its dispatch holds the GIL between launches and drops it at
each (as torch's bindings drop it around each op); what follows it holds no GIL (an accelerator step's wait on its
device, a cpu step's kernels, which hold a core instead).

Assertions are on counts and on the GIL's own hand-off: with a long switch interval S, a thread that wants the GIL
from a thread running Python waits S for it, while one that waits on a thread doing I/O gets it at that thread's
next system call. A dispatch that must take the GIL back from a pure-Python thread after a launch is then S longer,
one beside a thread doing only I/O is not (S is many times the work: load cannot make the one look like the other).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mpi4py import MPI

from studyctl.definition.inputs.training import CPU_DISPATCH_SHARE, DISPATCH_SHARE
from worker.compute import OPS_PER_LAUNCH, CudaCompute, DeviceCompute, DeviceQueue, Dispatch, HostCompute, Trainer

SWITCH_S = 1.0
STEP_S = 0.05


@contextmanager
def beside(work: Callable[[], None], switch_s: float = SWITCH_S) -> Iterator[list[int]]:
    """`work` looping on a background thread (its iterations counted) under a long GIL switch interval."""
    count = [0]
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            work()
            count[0] += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(switch_s)
    thread = threading.Thread(target=loop, daemon=True)
    try:
        thread.start()
        while count[0] < 3:
            time.sleep(0.01)  # it runs
        yield count
    finally:
        stop.set()
        sys.setswitchinterval(old)  # before the join: a waiting thread gets the GIL at the usual interval again
        thread.join()


def python_work() -> None:
    sum(i * i for i in range(200))  # pure Python: holds the GIL until the interpreter forces it to switch


@pytest.fixture
def io_work(tmp_path: Path) -> Iterator[Callable[[], None]]:
    fd = os.open(tmp_path / "io", os.O_WRONLY | os.O_CREAT)
    block = b"\0" * (1 << 20)
    try:
        yield lambda: os.pwrite(fd, block, 0)  # the copy into the page cache runs with the GIL released
    finally:
        os.close(fd)


def calibrated(share: float = 0.4, compute_s: float = STEP_S) -> DeviceCompute:
    work = DeviceCompute(compute_s, share)
    work.calibrate()
    return work


def host(share: float = 0.4, compute_s: float = STEP_S) -> HostCompute:
    work = HostCompute(compute_s, share)
    work.calibrate()
    return work


MODELS = {"accelerator": calibrated, "cpu": host}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_dispatch_hands_the_gil_to_an_io_thread_at_its_launches(model: str, io_work: Callable[[], None]) -> None:
    """A writer between two system calls gets the GIL at the dispatch's next launch, not after a switch interval:
    the dispatch of one step lets it write many times and is never held up for S."""
    work = MODELS[model]()
    launches = work.dispatch.ops // OPS_PER_LAUNCH
    with beside(io_work) as count:
        before, start = count[0], time.perf_counter()
        done = work.dispatch.run(work.dispatch.ops)
        took, during = time.perf_counter() - start, count[0] - before
    assert done == work.dispatch.ops and launches > 100
    assert during > 0, "the I/O thread wrote during the dispatch: it had the GIL at a launch"
    assert took < SWITCH_S / 2, "and gave it back at its next write: the dispatch never waited S"


def test_a_python_thread_delays_the_step_and_an_io_thread_does_not(io_work: Callable[[], None]) -> None:
    work = calibrated()
    work.dispatch.ops = 2 * OPS_PER_LAUNCH  # a short dispatch: what the step waits for is the GIL after its device
    work.queue.per_launch = work.device_s / 2
    switch_s = 0.2

    def step_s() -> float:
        start = time.perf_counter()
        work.run()
        return time.perf_counter() - start

    with beside(python_work, switch_s):
        python = min(step_s() for _ in range(2))
    with beside(io_work, switch_s) as count:
        before = count[0]
        io = min(step_s() for _ in range(2))
        writes = count[0] - before
    assert python >= switch_s, "after its device wait the step waited a switch interval for the GIL"
    assert io < switch_s / 2, "the I/O thread gave the GIL back at its next write"
    assert writes > 0, "and it wrote while the step waited on its device"


def test_the_device_wait_lets_a_python_thread_run() -> None:
    work = calibrated()
    with beside(python_work) as count:
        time.sleep(0.02)
        before = count[0]  # this thread holds the GIL again: the background thread waits SWITCH_S for it
        work.queue.launch(time.perf_counter(), STEP_S)
        work.wait()
        assert count[0] > before, "waiting on the device releases the GIL"


def test_a_cpu_steps_kernels_let_a_python_thread_run() -> None:
    work = host()
    assert work.passes > 0
    with beside(python_work) as count:
        time.sleep(0.02)
        before = count[0]  # this thread holds the GIL again: the background thread waits SWITCH_S for it
        work.kernels()
        assert count[0] > before, "the kernels' part releases the GIL"


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("share", [0.1, 0.5])
def test_calibration_gives_the_share_asked_for_on_an_idle_rank(model: str, share: float) -> None:
    """In this thread's CPU time (load stretches the wall time of the same work, not its CPU time)."""
    work = MODELS[model](share, compute_s=0.2)
    start = time.thread_time()
    work.dispatch.run(work.dispatch.ops)
    used = time.thread_time() - start
    assert 0.5 < used / (share * 0.2) < 2.0, used
    if isinstance(work, DeviceCompute):
        assert work.queue.per_launch * work.launches == pytest.approx(0.2), "the device works the whole step"
    else:
        assert work.kernel_s == pytest.approx(0.2 * (1 - share)), "the kernels do the rest"


def test_no_share_means_no_dispatch_and_each_model_has_its_own_default() -> None:
    work = calibrated(0.0)
    assert work.dispatch.ops == 0 and work.device_s == STEP_S
    assert host(0.0).dispatch.ops == 0 and host(1.0).passes == 0, "all dispatch: no kernels"
    assert Dispatch().run(0) == 0
    comm = MPI.COMM_SELF
    chosen = Trainer(comm, STEP_S, "cpu", 0.0, dispatch_share=0.5).work
    assert isinstance(chosen, HostCompute) and chosen.dispatch_share == 0.5
    cpu = Trainer(comm, STEP_S, "cpu", 0.0).work
    assert isinstance(cpu, HostCompute) and cpu.dispatch_share == CPU_DISPATCH_SHARE
    default = Trainer(comm, STEP_S, "accelerator", 0.0).work
    assert isinstance(default, DeviceCompute) and default.dispatch_share == DISPATCH_SHARE


def test_a_step_whose_dispatch_comes_in_under_its_share_still_takes_its_compute_time() -> None:
    """Calibration takes the fastest of three runs, so a dispatch can finish early: the device's part then waits
    until compute_s has passed since the step began (load can only make the step longer, never shorter)."""
    work = calibrated(share=0.5)
    work.dispatch.ops = 0  # the dispatch took no time at all
    start = time.perf_counter()
    work.run()
    assert time.perf_counter() - start >= STEP_S


def test_the_device_queue_absorbs_a_host_stall_shorter_than_its_lead() -> None:
    """Launches of 2 s of device work each: the host issuing every second runs ahead; a 3 s stall after the
    second launch is absorbed by the 3 s of lead built up, a 13 s one leaves the device idle for 10 of them."""
    queue = DeviceQueue(2.0)
    for t in (0.0, 1.0, 4.0, 5.0):  # a 3 s gap after t=1: the device was busy until 4
        queue.launch(t)
    assert queue.free_at == 8.0, "as if the host had never stalled (4 launches x 2 s from 0)"
    queue = DeviceQueue(2.0)
    for t in (0.0, 1.0, 14.0):  # a 13 s gap: the device ran out of work at 4 and idled until 14
        queue.launch(t)
    assert queue.free_at == 16.0
    queue.launch(15.0, work_s=0.5)
    assert queue.free_at == 16.5, "work of another size queues behind the rest"


def test_an_accelerator_step_lasts_until_its_device_work_is_done() -> None:
    """The step waits for the device to run everything its dispatch launched (its whole step's work)."""
    work = calibrated(share=0.5, compute_s=0.1)
    start = time.perf_counter()
    work.run()
    took = time.perf_counter() - start
    assert took >= 0.1, "the device's work cannot finish sooner than it takes"
    assert work.queue.free_at <= time.perf_counter()


def test_the_gpu_step_launches_its_device_work_at_the_dispatchs_launches() -> None:
    """CudaCompute's launching, on host tensors (the matmuls run on launch): one step launches the matmuls its
    device work comes to, spread over the dispatch's launches (with no dispatch, all at once)."""
    import torch

    work = CudaCompute(0.05, 0.25, device=torch.device("cpu"), size=32)
    work.calibrate()
    work.run()
    assert work.launches > 10
    assert abs(work.launched - work.device_s / work.matmul_s) <= 1
    idle = CudaCompute(0.05, 0.0, device=torch.device("cpu"), size=32)
    idle.calibrate()
    idle.run()
    assert idle.launches == 0 and idle.launched == round(idle.device_s / idle.matmul_s)
