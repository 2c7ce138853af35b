"""What a background checkpoint cost the training beside it, from step samples (pure functions).

Per rank and checkpoint: the steps run during the background window (blocking part over, persist or
drain running anywhere), and idle steps run right before the blocking part and right after the window
(no background anywhere, every rank at once). The rank's lost compute is the window's step time minus
as many idle steps: signed, never clamped, so a window that ran faster than idle counts negative and
noise averages out instead of adding up. Ranks are aggregated by their mean (the job's typical rank),
with a 95% confidence interval from the step samples (Welch: window and idle variances, t quantile).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from studyctl.definition.inputs.tdist import t_quantile_975
from studyctl.definition.result.result_fields import StrategyTiming
from studyctl.units import GIB


@dataclass(frozen=True)
class RankWrite:
    """One rank's figures of one async/tiered checkpoint, gathered by rank 0."""

    blocking_s: float
    background_s: float  # this rank's persist or drain, 0 when it ran none
    background_bytes: int
    window: list[float]  # step durations during the background window
    idle: list[float]  # idle step durations, before and after the window
    compute_wall_s: float = 0.0  # the window steps' compute part
    compute_cpu_s: float = 0.0  # CPU time the main thread used in that compute part
    allreduce_bytes: int = 0  # gradient bytes all-reduced in the window


@dataclass(frozen=True)
class Loss:
    """One rank's lost compute (s, signed), its slowdown, and the variance of the loss and its parts' df."""

    lost_s: float
    slowdown: float
    idle_mean_s: float
    parts: tuple[tuple[float, int], ...]  # (variance, degrees of freedom) of each independent part


def _var(values: Sequence[float]) -> float:
    return statistics.variance(values) if len(values) > 1 else 0.0


def rank_loss(window: Sequence[float], idle: Sequence[float]) -> Loss | None:
    """Window time − n × idle mean, for a rank with window steps and idle steps (else None).

    Var(loss) = n·s_w² + n²·s_i²/m: the window's own noise and the idle mean's. A window of one step has no
    variance of its own; the idle steps' stands in for it (what a step varies by with nothing beside it)."""
    n, m = len(window), len(idle)
    if not n or not m:
        return None
    idle_mean = statistics.fmean(idle)
    if idle_mean <= 0:
        return None
    s_idle = _var(idle)
    s_window, df_window = (_var(window), n - 1) if n > 1 else (s_idle, m - 1)
    return Loss(lost_s=math.fsum(window) - n * idle_mean, slowdown=statistics.fmean(window) / idle_mean - 1,
                idle_mean_s=idle_mean, parts=((n * s_window, df_window), (n * n * s_idle / m, m - 1)))


def mean_ci(losses: Sequence[Loss]) -> float | None:
    """95% CI half-width of the mean loss over ranks: Welch-Satterthwaite degrees of freedom over every part."""
    parts = [(v / len(losses) ** 2, df) for loss in losses for v, df in loss.parts]
    total = math.fsum(v for v, _ in parts)
    if total <= 0:
        return 0.0 if parts else None
    denominator = math.fsum(v * v / df for v, df in parts if df > 0)
    if denominator <= 0:
        return None
    df = max(1, int(total * total / denominator))
    return t_quantile_975(df) * math.sqrt(total)


def write_timing(index: int, ranks: Sequence[RankWrite]) -> StrategyTiming:
    """One checkpoint's strategy fields from every rank's figures; interference is the mean over ranks."""
    steps = [s for r in ranks for s in r.window]
    background_s = max(r.background_s for r in ranks)
    background_bytes = sum(r.background_bytes for r in ranks)
    losses = [loss for r in ranks if (loss := rank_loss(r.window, r.idle)) is not None]
    compute_wall = math.fsum(r.compute_wall_s for r in ranks)
    return StrategyTiming(
        phase="write", index=index, blocking_s=max(r.blocking_s for r in ranks), background_s=background_s,
        background_bytes=background_bytes,
        background_GiBps=background_bytes / background_s / GIB if background_s > 0 else 0.0,
        compute_steps=len(steps), compute_step_s_mean=statistics.fmean(steps) if steps else None,
        compute_slowdown=statistics.fmean(x.slowdown for x in losses) if losses else None,
        interference_s=statistics.fmean(x.lost_s for x in losses) if losses else 0.0,
        idle_step_s_mean=statistics.fmean(x.idle_mean_s for x in losses) if losses else None,
        interference_ci_s=mean_ci(losses) if losses else None,
        allreduce_bytes=sum(r.allreduce_bytes for r in ranks),
        compute_cpu_share=math.fsum(r.compute_cpu_s for r in ranks) / compute_wall if compute_wall > 0 else None)
