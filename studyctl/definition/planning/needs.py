"""Plan's inverse question: what bandwidth keeps the waste of checkpointing under `training.target_overhead`.

Full-size (nominal) bytes, the job's failure rate, and one bandwidth b for what training waits on: every
checkpoint blocks for C = checkpoint bytes / b; a failure's restart takes R = restart_s + bytes the restore
reads from storage / b. What b is depends on the strategy (BLOCKS_ON): for async and tiered the restore is
assumed to read at the rate the checkpoint blocks on, which plan says where it prints the answer.
Two answers:
  at the configured interval: the b whose checkpoint share C / (T + C) is the target, and the total waste it
  leaves (checkpoints, rework and restarts: Daly's complete model);
  at the optimum: the smallest b whose total waste at Daly's interval for its C is the target, or none when
  the restarts alone waste more (1 − e^(−restart/M) with infinite bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from studyctl.definition.inputs.training import (
    TrainingSpec,
    checkpoint_share,
    daly_interval_s,
    max_cost_at_checkpoint_share,
    max_cost_at_total_waste,
    restart_floor_share,
    total_waste_share,
)
from studyctl.units import GIB

# What each strategy's training waits on: the bandwidth the inverse answer asks for.
BLOCKS_ON = {"sync": "from the writers to shared storage", "async": "into host memory (snapshot)",
             "tiered": "into the node-local tier"}
# How the same bandwidth serves a failure's restore, per strategy (the model's assumption, stated by plan).
RESTORE_AT = {"sync": "restores read shared storage at this rate",
              "async": "restores are assumed to read shared storage at this rate too",
              "tiered": "a failure's restore is assumed to move its bytes at this rate too (the replaced node's "
                        "from shared storage)"}

@dataclass(frozen=True, slots=True)
class TrainingNeeds:
    """The inverse answer at full size, with every input it used (a plan row's training columns)."""

    nominal_checkpoint_bytes: int
    restore_storage_bytes: int
    target_overhead: float
    interval_s: float
    step_s: float
    simulated_step_s: float
    job_nodes: int
    point_nodes: int
    node_mtbf_h: float | None
    job_failures_per_day: float | None
    job_mtbf_s: float | None
    restart_s: float
    restart_s_given: bool
    required_blocking_GiBps: float
    checkpoint_share_at_interval: float
    total_waste_at_interval: float | None
    required_background_GiBps: float | None  # async and tiered: the drain's (the whole checkpoint in the interval)
    required_blocking_GiBps_at_optimum: float | None
    optimum_interval_s: float | None
    checkpoint_cost_s_at_optimum: float | None
    checkpoint_share_at_optimum: float | None
    total_waste_at_optimum: float | None
    restart_waste_floor: float | None  # what restarts alone waste, where no bandwidth reaches the target


@lru_cache(maxsize=4096)
def training_needs(nominal_bytes: int, restore_storage_bytes: int, point_nodes: int, strategy: str,
                   training: TrainingSpec) -> TrainingNeeds:
    """The inverse answer and every input it used (full size: `nominal_bytes` blocked per checkpoint,
    `restore_storage_bytes` read from storage per restore); the background drain's shared-storage bandwidth for
    async and tiered (the whole checkpoint within the interval)."""
    target, interval, mtbf = training.target_overhead, training.interval_s, training.job_mtbf_s(point_nodes)
    restart = training.restart_s or 0.0
    per_cost = restore_storage_bytes / nominal_bytes if nominal_bytes else 0.0
    cost = max_cost_at_checkpoint_share(interval, target)
    out: dict[str, Any] = {
        "nominal_checkpoint_bytes": nominal_bytes, "restore_storage_bytes": restore_storage_bytes,
        "target_overhead": target, "interval_s": interval, "step_s": training.step_s,
        "simulated_step_s": training.simulated_step.compute_s, "job_nodes": training.nodes or point_nodes,
        "point_nodes": point_nodes, "node_mtbf_h": training.node_mtbf_h,
        "job_failures_per_day": training.job_failures_per_day, "job_mtbf_s": mtbf,
        "restart_s": restart, "restart_s_given": training.restart_s is not None,
        "required_blocking_GiBps": nominal_bytes / cost / GIB,
        "checkpoint_share_at_interval": checkpoint_share(interval, cost),
        "total_waste_at_interval": total_waste_share(interval, cost, mtbf, restart + per_cost * cost)
        if mtbf else None,
        "required_background_GiBps": nominal_bytes / interval / GIB if strategy != "sync" else None,
    }
    return TrainingNeeds(**out, **_at_optimum(nominal_bytes, per_cost, mtbf, target, restart))


def _at_optimum(nominal_bytes: int, per_cost: float, mtbf: float | None, target: float,
                restart: float) -> dict[str, Any]:
    """The smallest bandwidth whose total waste at Daly's interval is the target, with what it implies."""
    none = dict.fromkeys(("required_blocking_GiBps_at_optimum", "optimum_interval_s", "checkpoint_cost_s_at_optimum",
                          "checkpoint_share_at_optimum", "total_waste_at_optimum", "restart_waste_floor"))
    if not mtbf:
        return none
    floor = restart_floor_share(restart, mtbf)
    cost = max_cost_at_total_waste(mtbf, target, restart, restore_per_cost=per_cost)
    if cost <= 0.0:
        return {**none, "restart_waste_floor": floor}
    interval = daly_interval_s(cost, mtbf)
    return {"required_blocking_GiBps_at_optimum": nominal_bytes / cost / GIB, "optimum_interval_s": interval,
            "checkpoint_cost_s_at_optimum": cost, "checkpoint_share_at_optimum": checkpoint_share(interval, cost),
            "total_waste_at_optimum": total_waste_share(interval, cost, mtbf, restart + per_cost * cost),
            "restart_waste_floor": floor}
