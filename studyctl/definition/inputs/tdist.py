"""Student's t two-sided 95% quantile (pure; no scipy), for confidence intervals in the worker and the analysis.

A table for df 1..30 (exact to 3 decimals) and a Cornish-Fisher expansion beyond (error < 1e-4 from df 31 on).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

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


def half_width(n: int, sd: float) -> float:
    """The 95% interval's half width around a mean of n values with sample standard deviation sd (n − 1 df); NaN
    below two values. One formula for every Student t interval, per value or per group of a table."""
    return t_quantile_975(n - 1) * sd / math.sqrt(n) if n >= 2 else math.nan


def log_interval(values: Iterable[float | None]) -> tuple[int, float, float, float]:
    """(n, low, high, se_log): the 95% interval of rates that spread by factors (a probe's rounds on a shared
    disk), Student t over their logarithms, so it stays positive and is as wide below as above as a factor; n
    counts the positive finite values, and below two of them low, high and se_log are NaN. One rule for the probe
    that decides when a ceiling is narrow enough and for the analysis that reports its interval."""
    logs = [math.log(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    n = len(logs)
    if n < 2:
        return n, math.nan, math.nan, math.nan
    mean = math.fsum(logs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (n - 1))
    se, half = sd / math.sqrt(n), half_width(n, sd)
    return n, math.exp(mean - half), math.exp(mean + half), se
