"""Timed phases: the barrier, the per-rank stamps, and the vote that makes one rank's failure everyone's."""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from typing import Any

from studyctl.definition.result.result_schema import Phase as PhaseName
from studyctl.states import FailureClass
from worker import io, residency
from worker.timing import checkpoint_timing

Sampler = Callable[[], "residency.Sample | None"]  # a rank's residency sample of the files it is about to read


class WorkerFailure(Exception):
    """A failure the worker understood; every rank raises it together."""

    def __init__(self, failure_class: FailureClass, reason: str) -> None:
        super().__init__(reason)
        self.failure_class = failure_class
        self.reason = reason


def describe_oserror(exc: OSError, path: str) -> tuple[str, str]:
    if getattr(exc, "reason", None):  # an object store's failure (studyctl.objstore): one line with its target
        return FailureClass.IO_ERROR.value, str(exc.reason)  # type: ignore[attr-defined]
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return FailureClass.IO_ERROR.value, f"no space left while writing {path} ({exc.strerror})"
    if isinstance(exc, io.DirectIORefused):
        return FailureClass.DIRECT_IO_REFUSED.value, str(exc.strerror)
    return FailureClass.IO_ERROR.value, f"{exc.strerror or exc} on {path}"


class Phase:
    """One timed checkpoint or restore on this rank."""

    def __init__(self) -> None:
        self.bytes = 0
        self.files = 0
        self.error: tuple[str, str] | None = None
        self.start = self.end = 0.0
        self.end_at: float | None = None  # a strategy's own end stamp (durable), when not the work's return
        self.extra: Any = None  # a strategy's per-rank figures, gathered with the stamps
        self.split: io.Split | None = None  # where the rank's time went, set by work that opens files
        self.requests: Any = None  # an object store's RequestCounts of this phase (worker.objects), else None


YIELD_S = 0.0002  # a waiting rank's poll interval: well below any phase's duration


class Clock:
    """Timed phases and the error vote that closes each one.

    Stamps are MPI.Wtime() (monotonic, high resolution) shifted by one per-rank anchor to the epoch:
    MPICH's Wtime is not global (MPI_WTIME_IS_GLOBAL = 0), so raw values from two nodes cannot be
    compared, while epoch time from NTP-synchronised nodes can.
    """

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        self.comm = comm
        self.wtime = MPI.Wtime
        self.anchor = time.time() - MPI.Wtime()
        self.pending: tuple[str, str] | None = None  # an off-clock error waiting for the next vote
        self.extras: list[Any] = []  # every rank's `extra` of the last phase

    def off_clock(self, work: Callable[[], object]) -> None:
        """Work outside the timed region; an OSError is voted on at the next phase."""
        if self.pending is None:
            try:
                work()
            except OSError as exc:
                self.pending = describe_oserror(exc, exc.filename or "the point directory")

    def phase(self, phase: PhaseName, index: int, step: str, host: str, prepare: Callable[[], object],
              work: Callable[[Phase], None], collective: bool = False, sample: Sampler | None = None) -> Any:
        """prepare (off the clock), Barrier, stamp, work, stamp; the allgather closes the phase and votes. A
        restore's `sample` runs once every rank has prepared (evicted), off the clock: the timing records its
        sum over ranks (worker.residency)."""
        self.off_clock(prepare)
        resident = self._sample(sample) if sample is not None else None
        ph = Phase()
        ph.error, self.pending = self.pending, None
        self.comm.Barrier()
        ph.start = self.wtime()
        if ph.error is None or collective:  # collective work runs on every rank, or the others would hang
            work(ph)
        ph.end = ph.end_at if ph.end_at is not None else self.wtime()
        self.wait_for_all()
        split = ph.split.seconds() if ph.split is not None else None
        stamps = self.comm.allgather((self.comm.Get_rank(), host, ph.start + self.anchor, ph.end + self.anchor,
                                      ph.bytes, ph.files, split, ph.error, ph.extra, ph.requests, resident))
        raise_first([s[7] for s in stamps])
        self.extras = [s[8] for s in stamps]
        return checkpoint_timing(phase, index, step, [s[:7] for s in stamps], {s[0]: s[9] for s in stamps},
                                 residency.total(s[10] for s in stamps) if sample is not None else None)

    def _sample(self, sample: Sampler) -> residency.Sample | None:
        """After every rank's eviction (a barrier), this rank's sample; an error is no failure of the phase (the
        read itself will say what is wrong): the sample is then unknown."""
        self.comm.Barrier()
        try:
            return sample()
        except OSError:
            return None

    def wait_for_all(self) -> None:
        """Wait for the other ranks without spinning. MPICH busy-polls in blocking collectives: a rank done
        early would take a core from the ranks still copying into the page cache and from the kernel's
        writeback (benchmarks/collective_spin.py: the waiting rank used 68% of a core, 7% this way)."""
        request = self.comm.Ibarrier()
        while not request.Test():
            time.sleep(YIELD_S)

    def vote(self) -> None:
        """A last vote for off-clock work after the final phase."""
        errors, self.pending = self.comm.allgather(self.pending), None
        raise_first(errors)


def raise_first(errors: list[tuple[str, str] | None]) -> None:
    for error in errors:
        if error:
            raise WorkerFailure(FailureClass(error[0]), error[1])
