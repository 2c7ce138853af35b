"""A recovery axis value joined to its point at expansion: the restart's training step, and why it cannot run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from studyctl.definition.checkpoint.points import CheckpointOptions, Point
from studyctl.definition.checkpoint.recovery import Recovery, allocation_nodes, recovery_problems
from studyctl.definition.inputs.training import TrainingSpec

if TYPE_CHECKING:
    from studyctl.definition.checkpoint.restart_plan import RestartColumns

RESHARDING = ("shrink", "grow")  # the scenarios that restart onto another layout (definition.checkpoint.reshard)


def recovery_fields(recovery: Recovery | None, fields: dict[str, Any], training: TrainingSpec, checked: bool = True
                    ) -> tuple[Recovery | None, tuple[str, ...]]:
    """(the point's Recovery with the sweep's simulated step, the restart's problems); `checked`: the point's own
    layout is possible (a restart of an impossible layout is not judged)."""
    if recovery is None:
        return None, ()
    recovery = recovery.model_copy(update={"step": training.simulated_step})
    if not checked:
        return recovery, ()
    return recovery, tuple(point_recovery_problems(Point.model_construct(**fields, recovery=recovery, filesystem="",
                                                                          repetition=0)))


def point_recovery_problems(point: Point) -> list[str]:
    """`recovery_problems` of a point (empty without a recovery)."""
    if point.recovery is None:
        return []
    opts = point.checkpoint
    return recovery_problems(point.recovery, point.model, point.parallelism, point.nodes, point.ranks_per_node,
                             tiered=opts.strategy == "tiered", writes=opts.writes, reads=opts.reads,
                             subset=opts.subset_world_size is not None) + _unsupported(point.recovery, opts)


def _unsupported(recovery: Recovery, opts: CheckpointOptions) -> list[str]:
    """A restart reads DLIO's files with the stream reader, and a reshard knows the tensors of state megatron
    written by DP replica 0 (definition.checkpoint.tensor_layout): other engines, states and writers are refused, each
    in
    one line naming both keys."""
    label = recovery.label()
    out = [f"recovery {label} with checkpoint.engine {opts.engine}: a restart reads DLIO's files with the "
           "stream reader; use engine stream"] if opts.engine != "stream" else []
    if recovery.scenario in RESHARDING:
        out += [f"recovery {label} with checkpoint.{key} {getattr(opts, key)}: a restart onto another layout "
                f"knows the tensors of state megatron written by replica 0 only; use {key} {default}"
                for key, default in (("state", "megatron"), ("replicated_writer", "dp0"))
                if getattr(opts, key) != default]
    return out


def running_ranks(point: Point) -> int:
    """The most ranks the point runs at once: a recovery point's larger world (writing or restart)."""
    return allocation_nodes(point.nodes, point.ranks_per_node, point.recovery) * point.ranks_per_node


def allocation_node_hours(point: Point, estimated_seconds: float) -> float:
    """The node-hours of the allocation a recovery point holds: the larger of both worlds, for its whole run."""
    nodes = point.nodes if point.recovery is None else allocation_nodes(point.nodes, point.ranks_per_node,
                                                                        point.recovery)
    return nodes * estimated_seconds / 3600


def restart_columns_of(point: Point) -> RestartColumns | None:
    """For a restart onto another layout: what it opens and reads against a same-shape restore (`restart_plan`,
    reshard's); None for any other point."""
    recovery = point.recovery
    if recovery is None or recovery.scenario not in RESHARDING:
        return None
    from studyctl.definition.checkpoint.recovery import restart_layout
    from studyctl.definition.checkpoint.restart_plan import restart_columns

    opts, par = point.checkpoint, point.parallelism
    return restart_columns(point.model, par, restart_layout(point.model, par, recovery), opts.scale, opts.naming,
                           opts.restore)


def recovery_label(point: Point) -> str:
    """The point's scenario in the sweep's words; "none" for a point without a restart."""
    return point.recovery.label() if point.recovery is not None else "none"
