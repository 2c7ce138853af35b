"""Statistics over repetitions (pure): mean, sample stdev, Student-t 95% confidence intervals.

No scipy: the two-sided 95% t quantile comes from a table for df 1..30 (exact to 3 decimals) and a
Cornish-Fisher expansion beyond (error < 1e-4 from df 31 on).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# t_{0.975, df} for df = 1..30 (two-sided 95%); beyond, a Cornish-Fisher expansion (error < 1e-3).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}: the multiplier of the standard error for a two-sided 95% interval."""
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def describe(values: Sequence[float]) -> dict[str, float]:
    """n, mean, stdev (n-1), 95% CI half-width and bounds, min, max; NaN where n is too small."""
    clean = [float(v) for v in values if v is not None and not math.isnan(v)]
    n = len(clean)
    if n == 0:
        return {"n": 0, "mean": math.nan, "stdev": math.nan, "ci95": math.nan, "ci95_low": math.nan,
                "ci95_high": math.nan, "min": math.nan, "max": math.nan}
    mean = math.fsum(clean) / n
    stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in clean) / (n - 1)) if n > 1 else math.nan
    half = t_quantile_975(n - 1) * stdev / math.sqrt(n) if n > 1 else math.nan
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
