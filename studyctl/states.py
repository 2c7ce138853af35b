"""Point states and failure classes: the one list every module uses."""

from __future__ import annotations

from enum import Enum


class State(str, Enum):
    PLANNED = "PLANNED"
    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    LOST = "LOST"


ACTIVE_STATES = frozenset({State.SUBMITTED, State.PENDING, State.RUNNING})
FINAL_STATES = frozenset(
    {State.COMPLETED, State.FAILED, State.TIMEOUT, State.CANCELLED, State.NODE_FAIL,
     State.PREEMPTED, State.OUT_OF_MEMORY, State.LOST}
)
RETRYABLE_STATES = FINAL_STATES - {State.COMPLETED}


class FailureClass(str, Enum):
    """Why a point failed, as the worker or the backend determined it."""

    CONFIG = "config"  # the point cannot run as configured
    WORLD_SIZE_MISMATCH = "world_size_mismatch"  # e.g. srun --mpi misconfigured: N worlds of 1
    INSUFFICIENT_SPACE = "insufficient_space"
    DIRECT_IO_REFUSED = "direct_io_refused"
    IO_ERROR = "io_error"  # ENOSPC mid-run, EIO, permission denied, ...
    TIMEOUT = "timeout"
    SCHEDULER = "scheduler"  # rejected by Slurm at submit time, node failure, ...
    CANCELLED = "cancelled"
    LOST = "lost"  # no result, no process, no scheduler record
    WORKER_CRASH = "worker_crash"  # non-zero exit without a worker error record
    BUSY = "busy"  # another live attempt writes this point's data directory: refused, nothing touched

# An excluded point has no state of its own: the sweep rules it out. Tables, status and the report
# show it under this label, in the place of a state.
EXCLUDED = "EXCLUDED"
NOT_FAILED = frozenset({*(s.value for s in ACTIVE_STATES), State.PLANNED.value, State.COMPLETED.value, EXCLUDED})


def shown_state(state: State, excluded: bool) -> str:
    """What a point is shown as: its state, or EXCLUDED."""
    return EXCLUDED if excluded else state.value
