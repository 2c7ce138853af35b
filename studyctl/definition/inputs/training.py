"""What checkpoints cost a training run: the sweep's `training:` block and a pure cost model.

Every figure is derived from a few measured or given inputs, so a reader can check it by hand:
  C  cost of one checkpoint to training (s): the blocking time, plus for background strategies the
     compute lost to interference and any wait for the previous persist;
  T  compute between checkpoints (s): `interval_steps · step_s` or `interval_min · 60`;
  M  mean time between failures of the whole job (s): node MTBF / nodes, or 1 / job failure rate;
  L  lag until a checkpoint is durable on shared storage after training resumes (async persist, tier drain);
  R  restart after a failure (s): relaunch (`restart_s`) plus the restore a failure needs.
Total waste is Daly's (2006) complete model: a period of T + C of wall time that failures (Poisson, mean M)
interrupt; each failure costs the time since the period began, plus R + L before the period starts again
(the lag is work redone from the older durable checkpoint, as exposed to failure as the restart). The
expected wall time of a period is M·e^((R+L)/M)·(e^((T+C)/M) − 1), so total waste = 1 − T / that.
Young's (1974) interval sqrt(2·C·M) is its first-order optimum; Daly's higher-order one is closer.
Every function takes floats or NumPy arrays (the analysis computes whole columns at once); NumPy is imported
only for arrays, so planning and following a study load no analysis stack.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from studyctl.definition.inputs.vocabulary import ComputeModel as ComputeModel

HOUR_S = 3600.0
DAY_S = 86400.0


# The share of an idle step the rank's Python thread spends dispatching (holding the GIL and a core), for each
# compute model; a figure of the CPU it was measured on (this project's 2-core EPYC):
# - accelerator: an eager GPT-2 XL step's host time, bf16 autocast and fused AdamW, over the H200's 0.378 s step
#   (`python -m benchmarks dispatch_share`: 0.23-0.29); the GPU check measured a GPT-2 medium step on an H200
#   launched by its host in 0.61 of its 0.075 s (a smaller model is faster on the device, not on the host);
# - cpu: a node training on its own CPUs with an eager framework, the engine check's real CPU job
#   (`benchmarks.real_training`'s `cpu` shape: GPT-2 XL's 48 layers and 25 heads at hidden size 200, fp32, fused
#   AdamW, 1 intra-op thread): the same graph's dispatch on tiny tensors over the step at its shape, both in the
#   thread's CPU time (`dispatch_share.cpu_share`: 75 ms of 390 ms, 0.19-0.20).
DISPATCH_SHARE = 0.25
CPU_DISPATCH_SHARE = 0.20
DISPATCH_SHARES: dict[ComputeModel, float] = {"accelerator": DISPATCH_SHARE, "cpu": CPU_DISPATCH_SHARE}
# looked up by what a sweep says (any YAML value), before it is a model
_SHARES_BY_NAME: dict[str, float] = {str(k): v for k, v in DISPATCH_SHARES.items()}


class SimulatedStep(BaseModel):
    """The training step async/tiered workers run beside a background checkpoint (not the real run's step)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compute_s: float = Field(0.5, gt=0, description="compute of one simulated step")
    compute: ComputeModel = Field("accelerator", description=(
        "accelerator: the rank's Python thread dispatches (dispatch_share of the step, holding the GIL and a "
        "core between launches) while its device runs what it launched, behind it, then all-reduces its "
        "gradients; cpu: the node trains on its CPUs, the same dispatch then its kernels on the same core "
        "(releasing the GIL)"))
    allreduce_mib: float = Field(16.0, ge=0, description="gradient all-reduce per step and rank (0: none)")
    dispatch_share: float = Field(DISPATCH_SHARE, ge=0, le=1, description=(
        "share of an idle step the rank's Python thread dispatches (holding the GIL and a core between launches; "
        "accelerator: its device runs the whole step behind the dispatch; cpu: its kernels do the rest); "
        f"default {DISPATCH_SHARE} for accelerator, "
        f"{CPU_DISPATCH_SHARE} for cpu, each measured from an eager training step"))

    @model_validator(mode="before")
    @classmethod
    def _default_share_of_the_model(cls, data: Any) -> Any:
        """An unset share is its compute model's default (an unknown model is the field's own error)."""
        if isinstance(data, dict) and data.get("dispatch_share") is None:
            model = data.get("compute", "accelerator")
            share = _SHARES_BY_NAME.get(model) if isinstance(model, str) else None
            data = {**data, "dispatch_share": share} if share is not None else data
        return data

    @model_serializer(mode="wrap")
    def _omit_default_share(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Left out at its default, so a recovery point's step (part of its id) keeps the id it had before."""
        data: dict[str, Any] = handler(self)
        if data.get("dispatch_share") == DISPATCH_SHARES[self.compute]:
            del data["dispatch_share"]
        return data

    def point_dispatch_share(self) -> float | None:
        """What a point carries: None at its compute model's default (so existing points keep their ids)."""
        return None if self.dispatch_share == DISPATCH_SHARES[self.compute] else self.dispatch_share


class TrainingSpec(BaseModel):
    """The sweep's `training:` block: the run the checkpoints serve."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step_s: float = Field(0.5, gt=0, description="one step of the real training run (interval_steps × step_s)")
    simulated_step: SimulatedStep = SimulatedStep()
    restart_s: float | None = Field(None, ge=0, description=(
        "relaunch after a failure, before the restore (default: the launch time measured for the point)"))
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


Num = Any  # a float, or a NumPy array of them


def _xp(*values: Any) -> ModuleType:
    """numpy when any value is an array (imported only then), else math."""
    if any(hasattr(v, "__array__") for v in values):
        import numpy
        return numpy
    return math


def _where(xp: ModuleType, cond: Any, yes: Any, no: Any) -> Num:
    return xp.where(cond, yes, no) if xp is not math else (yes if cond else no)


def young_interval_s(cost_s: Num, mtbf_s: Num) -> Num:
    """Young's (1974) first-order optimum of the compute between checkpoints: sqrt(2·C·M); NaN where C ≤ 0 (a
    cost below what was measurable, e.g. blocking outweighed by negative interference noise, has no optimum)."""
    xp = _xp(cost_s, mtbf_s)
    if xp is math:
        return math.sqrt(2.0 * cost_s * mtbf_s) if cost_s > 0 else math.nan
    with xp.errstate(invalid="ignore"):
        return xp.where(cost_s > 0, xp.sqrt(2.0 * cost_s * mtbf_s), xp.nan)


def daly_interval_s(cost_s: Num, mtbf_s: Num) -> Num:
    """Daly's (2006) higher-order optimum: sqrt(2CM)·(1 + sqrt(C/2M)/3 + (C/2M)/9) − C for 0 < C < 2M, M for
    C ≥ 2M; NaN where C ≤ 0 (see young_interval_s)."""
    xp = _xp(cost_s, mtbf_s)
    x = cost_s / (2.0 * mtbf_s)
    if xp is math:
        if cost_s <= 0:
            return math.nan
        if x >= 1.0:
            return mtbf_s
    with _quiet(xp):
        tau = xp.sqrt(2.0 * cost_s * mtbf_s) * (1.0 + xp.sqrt(x) / 3.0 + x / 9.0) - cost_s
    return _where(xp, cost_s > 0, _where(xp, x < 1.0, tau, mtbf_s), math.nan)


def checkpoint_share(interval_s: Num, cost_s: Num) -> Num:
    """Share of failure-free wall time spent on checkpoints: C / (T + C)."""
    return cost_s / (interval_s + cost_s)


def period_wall_s(interval_s: Num, cost_s: Num, mtbf_s: Num, restart_s: Num = 0.0, lag_s: Num = 0.0) -> Num:
    """Expected wall time to get one period (T of compute and its checkpoint C) done despite failures."""
    xp = _xp(interval_s, cost_s, mtbf_s, restart_s, lag_s)
    return mtbf_s * xp.exp((restart_s + lag_s) / mtbf_s) * xp.expm1((interval_s + cost_s) / mtbf_s)


def total_waste_share(interval_s: Num, cost_s: Num, mtbf_s: Num | None, restart_s: Num = 0.0,
                      lag_s: Num = 0.0) -> Num:
    """Share of wall time that does not advance training: checkpoints, rework and restarts (Daly's complete
    model); with no failure figure (None, NaN or an infinite MTBF) only the checkpoints."""
    if mtbf_s is None:
        return checkpoint_share(interval_s, cost_s)
    xp = _xp(interval_s, cost_s, mtbf_s, restart_s, lag_s)
    known = xp.isfinite(mtbf_s)
    if xp is math and not known:
        return checkpoint_share(interval_s, cost_s)
    with _quiet(xp):
        waste = 1.0 - interval_s / period_wall_s(interval_s, cost_s, _where(xp, known, mtbf_s, 1.0), restart_s,
                                                 lag_s)
    return _where(xp, known, waste, checkpoint_share(interval_s, cost_s))


def _quiet(xp: ModuleType) -> Any:
    import contextlib
    return xp.errstate(over="ignore", invalid="ignore") if xp is not math else contextlib.nullcontext()


def rework_share(interval_s: Num, cost_s: Num, mtbf_s: Num, lag_s: Num = 0.0) -> Num:
    """First-order share of wall time redone after failures: ((T + C)/2 + L) / M (for the breakdown)."""
    return ((interval_s + cost_s) / 2.0 + lag_s) / mtbf_s


def restart_share(restart_s: Num, mtbf_s: Num) -> Num:
    """First-order share of wall time spent restarting: R / M (for the breakdown)."""
    return restart_s / mtbf_s


def max_cost_at_total_waste(mtbf_s: float, target: float, restart_s: float = 0.0, lag_s: float = 0.0,
                            restore_per_cost: float = 0.0) -> float:
    """The largest checkpoint cost C whose total waste at Daly's interval for C stays within `target`;
    0.0 when the restarts alone waste more than that (no checkpoint is fast enough).

    `restore_per_cost`: restore seconds per second of C, when the restore's bytes move at the bandwidth the
    checkpoint blocks on (bytes restored / bytes blocked); the restart is then restart_s + restore_per_cost·C.
    """
    def waste(cost: float) -> float:
        restart = restart_s + restore_per_cost * cost
        return float(total_waste_share(daly_interval_s(cost, mtbf_s), cost, mtbf_s, restart, lag_s))

    if waste(1e-12 * mtbf_s) > target:
        return 0.0
    lo, hi = 0.0, mtbf_s
    while waste(hi) <= target and hi < 1e6 * mtbf_s:
        lo, hi = hi, hi * 2.0
    for _ in range(200):  # waste grows with C: bisect to float precision
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if waste(mid) <= target else (lo, mid)
        if hi - lo <= 1e-15 * hi:
            break
    return lo


def restart_floor_share(restart_s: Num, mtbf_s: Num, lag_s: Num = 0.0) -> Num:
    """Total waste no checkpoint bandwidth can avoid: with C → 0 and τ → 0, 1 − e^(−(R+L)/M)."""
    return -_xp(restart_s, mtbf_s, lag_s).expm1(-(restart_s + lag_s) / mtbf_s)


def max_cost_at_checkpoint_share(interval_s: float, target: float) -> float:
    """The largest cost with checkpoint_share(interval, cost) <= target: C = X·T / (1 − X)."""
    return target * interval_s / (1.0 - target)
