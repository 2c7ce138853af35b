"""What checkpoints cost a training run: the sweep's `training:` block and a pure cost model.

Every figure is derived from a few measured or given inputs, so a reader can check it by hand:
  C  cost of one checkpoint to training (s): the blocking time, plus for background strategies the
     compute lost to interference and any wait for the previous persist (`checkpoint_cost_s`);
  T  compute between checkpoints (s): `interval_steps · step_s` or `interval_min · 60`;
  M  mean time between failures of the whole job (s): node MTBF / nodes, or 1 / job failure rate;
  L  lag until a checkpoint is durable on shared storage after training resumes (async persist, tier drain);
  R  time to restore after a failure (s).
Overhead share = C / (T + C). Young/Daly interval T* = sqrt(2·C·M) (first order). Expected work lost per
failure = (T + C)/2 + L. Goodput = T/(T + C) − (expected lost work + R)/M, clamped to [0, 1].
The inverse (plan, before anything runs): the bandwidth whose checkpoint cost keeps the overhead at X,
at the given interval (C ≤ X·T/(1 − X)) and at the Young/Daly interval (C ≤ 2·M·X²/(1 − X)²).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

HOUR_S = 3600.0
DAY_S = 86400.0


class TrainingSpec(BaseModel):
    """The sweep's `training:` block: the run the checkpoints serve."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_s: float = Field(0.5, gt=0, description="one training step's compute; async/tiered workers run such "
                                                   "steps while their checkpoint persists in the background")
    interval_steps: PositiveInt | None = Field(None, description="steps between checkpoints")
    interval_min: float | None = Field(None, gt=0, description="minutes of training between checkpoints")
    nodes: PositiveInt | None = Field(None, description="nodes of the full-scale job (default: the point's)")
    node_mtbf_h: float | None = Field(None, gt=0, description="mean time between failures of one node")
    job_failures_per_day: float | None = Field(None, gt=0, description="failure rate of the whole job")
    target_overhead: float = Field(0.05, gt=0, lt=1, description="plan: bandwidth to keep overhead under this")

    @model_validator(mode="after")
    def _one_each(self) -> TrainingSpec:
        if self.interval_steps is not None and self.interval_min is not None:
            raise ValueError("give interval_steps or interval_min, not both")
        if self.node_mtbf_h is not None and self.job_failures_per_day is not None:
            raise ValueError("give node_mtbf_h (with nodes) or job_failures_per_day, not both")
        return self

    @property
    def interval_s(self) -> float:
        """Compute between checkpoints; 30 minutes unless the block says otherwise."""
        if self.interval_steps is not None:
            return self.interval_steps * self.step_s
        return (self.interval_min if self.interval_min is not None else 30.0) * 60.0

    def job_mtbf_s(self, point_nodes: int) -> float | None:
        """MTBF of the whole job, or None when the block gives no failure figure."""
        if self.job_failures_per_day is not None:
            return DAY_S / self.job_failures_per_day
        if self.node_mtbf_h is not None:
            return job_mtbf_s(self.node_mtbf_h * HOUR_S, self.nodes or point_nodes)
        return None


def job_mtbf_s(node_mtbf_s: float, nodes: int) -> float:
    """Independent node failures: the job fails when any of its nodes does."""
    return node_mtbf_s / nodes


def checkpoint_cost_s(blocking_s: float, interference_s: float = 0.0, background_s: float = 0.0,
                      interval_s: float = math.inf) -> float:
    """Training time one checkpoint costs: blocked, slowed, and waiting for a persist longer than the interval."""
    return blocking_s + max(interference_s, 0.0) + max(background_s - interval_s, 0.0)


def overhead_share(cost_s: float, interval_s: float) -> float:
    """Share of wall-clock time spent on checkpoints."""
    return cost_s / (interval_s + cost_s)


def young_daly_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Young's first-order optimal compute time between checkpoints."""
    return math.sqrt(2.0 * cost_s * mtbf_s)


def expected_lost_work_s(interval_s: float, cost_s: float, durable_lag_s: float = 0.0) -> float:
    """Work redone after a failure, on average: half a period, plus the time the last checkpoint was not durable."""
    return (interval_s + cost_s) / 2.0 + durable_lag_s


def goodput(interval_s: float, cost_s: float, mtbf_s: float | None, restore_s: float = 0.0,
            durable_lag_s: float = 0.0) -> float:
    """Share of wall-clock time that advances training."""
    useful = interval_s / (interval_s + cost_s)
    if mtbf_s is None:
        return useful
    lost = (expected_lost_work_s(interval_s, cost_s, durable_lag_s) + restore_s) / mtbf_s
    return min(1.0, max(0.0, useful - lost))


def max_cost_for_overhead(interval_s: float, max_overhead: float) -> float:
    """The largest checkpoint cost with overhead_share(cost, interval) <= max_overhead."""
    return max_overhead * interval_s / (1.0 - max_overhead)


def max_cost_at_optimum(mtbf_s: float, max_overhead: float) -> float:
    """The largest cost whose overhead at its own Young/Daly interval is max_overhead.

    C/(sqrt(2CM) + C) = X  ⇔  sqrt(C) = X·sqrt(2M)/(1 − X)  ⇔  C = 2·M·X²/(1 − X)².
    """
    return 2.0 * mtbf_s * max_overhead ** 2 / (1.0 - max_overhead) ** 2


def required_bandwidth(nbytes: float, max_cost_s: float) -> float:
    """Bytes/s that move `nbytes` within `max_cost_s`."""
    return nbytes / max_cost_s


def projection_factor(written_bytes: int, nominal_bytes: int) -> float:
    """Scaled runs: seconds at the nominal size, at the measured bandwidth (1.0 when not scaled)."""
    return nominal_bytes / written_bytes if written_bytes else 1.0


@dataclass(frozen=True)
class CostInputs:
    """Per point and strategy, in seconds (already projected when scaled)."""

    blocking_s: float
    interval_s: float
    mtbf_s: float | None = None
    interference_s: float = 0.0
    background_s: float = 0.0  # persist or drain after training resumed
    restore_s: float = 0.0


@dataclass(frozen=True)
class TrainingCost:
    checkpoint_cost_s: float
    overhead_share: float
    goodput: float
    lost_work_per_failure_s: float | None
    optimal_interval_s: float | None
    optimal_overhead_share: float | None
    optimal_lost_work_per_failure_s: float | None
    optimal_goodput: float | None

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)


def training_cost(inp: CostInputs) -> TrainingCost:
    """Every cost figure of one point at the given interval and at the Young/Daly interval."""
    cost = checkpoint_cost_s(inp.blocking_s, inp.interference_s, inp.background_s, inp.interval_s)
    lag = min(inp.background_s, inp.interval_s)
    at_interval = {"checkpoint_cost_s": cost, "overhead_share": overhead_share(cost, inp.interval_s),
                   "goodput": goodput(inp.interval_s, cost, inp.mtbf_s, inp.restore_s, lag)}
    if inp.mtbf_s is None:
        return TrainingCost(**at_interval, lost_work_per_failure_s=None, optimal_interval_s=None,
                            optimal_overhead_share=None, optimal_lost_work_per_failure_s=None, optimal_goodput=None)
    best = young_daly_interval_s(cost, inp.mtbf_s)
    best_cost = checkpoint_cost_s(inp.blocking_s, inp.interference_s, inp.background_s, best)
    best_lag = min(inp.background_s, best)
    return TrainingCost(**at_interval,
                        lost_work_per_failure_s=expected_lost_work_s(inp.interval_s, cost, lag),
                        optimal_interval_s=best, optimal_overhead_share=overhead_share(best_cost, best),
                        optimal_lost_work_per_failure_s=expected_lost_work_s(best, best_cost, best_lag),
                        optimal_goodput=goodput(best, best_cost, inp.mtbf_s, inp.restore_s, best_lag))
