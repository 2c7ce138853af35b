"""Is studyctl's figure the same as the reference's, within a band? Decided from an interval, not a point.

On this VM a call's time is often bimodal (the memory its page cache or tensors get was handed back to the host,
or not: `page_reuse`), so one ratio of medians lands on either mode by chance and a run's "within target" flips
from run to run. The estimate here is a ratio of trimmed means (the middle three quarters: a first call's or a
stalled call's outlier dropped, both modes kept as they came) with a 95% percentile-bootstrap interval, and the
verdict reads the whole interval against the band.

Paired samples (the two sides' calls made seconds apart, repetition by repetition: `engines_paired`) are resampled
as pairs, so a change of the machine's state between repetitions moves both sides; unpaired ones (a real job's
process against a studyctl point's: `engines_check`) are resampled side by side.
"""

from __future__ import annotations

import math
import random
import statistics

RESAMPLES = 2000
WITHIN, OUTSIDE, UNDECIDED = "within", "**outside**", "undecided (interval wider than the band)"


def trimmed_mean(values: list[float]) -> float:
    """The mean of the middle three quarters (at least one value cut from each end from three values on: a
    median of three, the mean of the middle four of six)."""
    n = len(values)
    cut = min(math.ceil(n / 8), (n - 1) // 2)
    return statistics.fmean(sorted(values)[cut:n - cut])


def ratio_interval(ours: list[float], theirs: list[float], paired: bool = True,
                   seed: int = 0) -> tuple[float, float, float]:
    """trimmed_mean(ours) / trimmed_mean(theirs) and its 95% percentile-bootstrap interval (a fixed seed: the same
    samples print the same). Paired: `ours[i]` and `theirs[i]` resampled together (equal lengths); else each
    side resampled on its own."""
    if paired and len(ours) != len(theirs):
        raise ValueError(f"paired samples need equal lengths, got {len(ours)} and {len(theirs)}")
    rng = random.Random(seed)

    def ratio(mine: list[float], other: list[float]) -> float:
        return trimmed_mean(mine) / trimmed_mean(other)

    def resample() -> float:
        if paired:
            picks = rng.choices(range(len(ours)), k=len(ours))
            return ratio([ours[i] for i in picks], [theirs[i] for i in picks])
        return ratio(rng.choices(ours, k=len(ours)), rng.choices(theirs, k=len(theirs)))

    resampled = sorted(resample() for _ in range(RESAMPLES))
    return ratio(ours, theirs), resampled[int(0.025 * RESAMPLES)], resampled[int(0.975 * RESAMPLES) - 1]


def verdict(low: float, high: float, target: float) -> str:
    """Equivalence read off the interval: inside the band, wholly outside it, or not decided by this many calls."""
    if 1 - target <= low and high <= 1 + target:
        return WITHIN
    if high < 1 - target or low > 1 + target:
        return OUTSIDE
    return UNDECIDED
