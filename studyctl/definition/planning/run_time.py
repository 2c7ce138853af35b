"""A point's estimated run time, counted one way for the plan's estimate (and its node-hours), calibration's budget
and the Slurm time limit; each brings its own assumptions (`Estimate`: the sweep's `estimate:`, or the Slurm
section's pessimistic rate and overhead).

What a point moves through storage: every checkpoint it writes, and what storage serves each restore (the restore
mode's rule: bytes a rank receives by broadcast are not read), a restart's restore included; a ceiling point, what
its probes write and read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from studyctl.definition.checkpoint.points import CheckpointOptions, Point
from studyctl.definition.checkpoint.restore_reads import storage_read_bytes
from studyctl.definition.planning.ceilings import ceiling_moved_bytes

if TYPE_CHECKING:
    from studyctl.definition.planning.sweep import Estimate


def restarts(point: Point) -> int:
    """Restores beyond the point's own reads: a recovery point's restart reads its checkpoint once more."""
    return int(point.recovery is not None)


def moved_bytes(written: int, storage_read: int, opts: CheckpointOptions, restarts: int = 0) -> int:
    """Bytes through storage: `written` per checkpoint written, `storage_read` per restore (restarts included)."""
    return written * opts.writes + storage_read * (opts.reads + restarts)


def point_moved_bytes(point: Point, estimate: Estimate | None = None) -> int:
    """What a feasible point moves through storage in its whole run (a ceiling's rounds depend on the rate
    `estimate` assumes: its probes stream for a bounded time)."""
    if point.role == "ceiling":
        return ceiling_moved_bytes(point, estimate)
    opts = point.checkpoint
    return moved_bytes(point.layout().total_bytes, storage_read_bytes(point.model, point.parallelism, opts), opts,
                       restarts(point))


def point_run_seconds(point: Point, estimate: Estimate) -> float:
    """A feasible point's run time under `estimate`: its overhead, its bytes at the assumed rate, its simulated
    training (`Estimate.run_seconds`; a ceiling point's probes run none)."""
    training = 0.0 if point.role == "ceiling" else point.checkpoint.simulated_training_s()
    return estimate.run_seconds(point_moved_bytes(point, estimate), point.nodes, training)
