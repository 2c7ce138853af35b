"""Statistics over repetitions (pure): mean, sample stdev, Student-t 95% confidence intervals.

No scipy: the two-sided 95% t quantile is `studyctl.definition.inputs.tdist`'s (the worker's intervals use it too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from studyctl.definition.inputs.tdist import half_width, t_quantile_975


def describe(values: Sequence[float]) -> dict[str, float]:
    """n, mean, stdev (n-1), 95% CI half-width and bounds, min, max; NaN where n is too small."""
    clean = [float(v) for v in values if v is not None and not math.isnan(v)]
    n = len(clean)
    if n == 0:
        return {"n": 0, "mean": math.nan, "stdev": math.nan, "ci95": math.nan, "ci95_low": math.nan,
                "ci95_high": math.nan, "min": math.nan, "max": math.nan}
    mean = math.fsum(clean) / n
    stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in clean) / (n - 1)) if n > 1 else math.nan
    half = half_width(n, stdev)
    return {"n": n, "mean": mean, "stdev": stdev, "ci95": half, "ci95_low": mean - half,
            "ci95_high": mean + half, "min": min(clean), "max": max(clean)}


def ratio_ci(mean_a: float, se_a: float, mean_b: float, se_b: float, df: int) -> tuple[float, float, float]:
    """B/A with a 95% interval on the log scale: r · exp(± t · sqrt((se_a/a)² + (se_b/b)²)).

    The delta method's relative error, applied to log r: the interval stays positive and is as wide
    below r as a factor as above it (a symmetric r ± half goes negative with three noisy repetitions).
    df is the caller's choice; ratios and compare pass min(n_a, n_b) - 1, conservative next to Welch's.
    The interval is NaN when either side has one repetition (no standard error).
    """
    if not mean_a or math.isnan(mean_a) or math.isnan(mean_b):
        return math.nan, math.nan, math.nan
    r = mean_b / mean_a
    if math.isnan(se_a) or math.isnan(se_b) or not mean_b:
        return r, math.nan, math.nan
    rel = math.sqrt((se_a / mean_a) ** 2 + (se_b / mean_b) ** 2)
    factor = math.exp(t_quantile_975(max(df, 1)) * rel)
    return r, r / factor, r * factor


def total_over_total(amounts: Sequence[float], times: Sequence[float]) -> dict[str, float]:
    """Σamount / Σtime over repetitions (e.g. bytes over seconds), with a 95% interval.

    The interval is the ratio estimator's: se = sqrt(Σ(a_i − R·t_i)² / (n(n−1))) / mean(t), Student t
    with n − 1 df; NaN with one repetition. Pooling totals (not averaging rates) keeps a slow
    repetition's weight equal to the time it took, as a training job experiences it.
    """
    pairs = [(float(a), float(t)) for a, t in zip(amounts, times, strict=True)
             if not (math.isnan(a) or math.isnan(t))]
    n = len(pairs)
    total_t = math.fsum(t for _, t in pairs)
    if n == 0 or total_t <= 0:
        return {"n": n, "value": math.nan, "se": math.nan, "ci95": math.nan, "ci95_low": math.nan,
                "ci95_high": math.nan}
    r = math.fsum(a for a, _ in pairs) / total_t
    if n == 1:
        se = half = math.nan
    else:
        se = math.sqrt(math.fsum((a - r * t) ** 2 for a, t in pairs) / (n * (n - 1))) / (total_t / n)
        half = t_quantile_975(n - 1) * se
    low = max(r - half, 0.0) if not math.isnan(half) else math.nan  # a rate is never negative
    return {"n": n, "value": r, "se": se, "ci95": half, "ci95_low": low, "ci95_high": r + half}
