"""Student's t two-sided 95% quantile (pure; no scipy), for confidence intervals in the worker and the analysis.

A table for df 1..30 (exact to 3 decimals) and a Cornish-Fisher expansion beyond (error < 1e-4 from df 31 on).
"""

from __future__ import annotations

import math

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
