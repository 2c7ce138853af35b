"""A figure's mean and 95% CI per cell over its repetitions: the one pooling rule the training and the recovery
tables share."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.stats import t_quantile_975


def ci_columns(grouped: Any, names: list[str]) -> pd.DataFrame:
    """Mean and 95% half-width (Student t over the repetitions that have the figure) per cell."""
    mean, std, count = grouped[names].mean(), grouped[names].std(ddof=1), grouped[names].count()
    t = count.apply(lambda col: col.map(lambda n: t_quantile_975(int(n) - 1) if n > 1 else np.nan))
    half = t * std / np.sqrt(count.where(count > 0))
    return mean.join(half.add_suffix("_ci95"))
