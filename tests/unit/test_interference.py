"""Interference from step samples: signed, never clamped, the mean over ranks, with a 95% CI (pure)."""

from __future__ import annotations

import math
import statistics

import pytest

from studyctl.definition.inputs.tdist import t_quantile_975
from worker.interference import RankWrite, mean_ci, rank_loss, write_timing


def rank(window: list[float], idle: list[float], **over: float) -> RankWrite:
    fields = {"blocking_s": 0.1, "background_s": 1.0, "background_bytes": 1 << 20, **over}
    return RankWrite(window=window, idle=idle, **fields)  # type: ignore[arg-type]


def test_a_window_faster_than_idle_counts_negative() -> None:
    timing = write_timing(0, [rank([0.88, 0.88, 0.88], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])])
    assert timing.interference_s == pytest.approx(3 * 0.88 - 3 * 1.0)
    assert timing.compute_slowdown == pytest.approx(-0.12)


def test_ranks_are_averaged_not_the_worst_taken_and_nothing_is_clamped() -> None:
    idle = [1.0] * 6
    slow, fast = rank([1.5, 1.5], idle), rank([0.9, 0.9], idle)
    timing = write_timing(3, [slow, fast])
    assert timing.interference_s == pytest.approx((1.0 + -0.2) / 2), "the mean of +1.0 s and -0.2 s"
    assert timing.compute_slowdown == pytest.approx((0.5 + -0.1) / 2)
    assert timing.compute_steps == 4 and timing.idle_step_s_mean == pytest.approx(1.0)


def test_the_ci_comes_from_the_step_samples_and_shrinks_with_more_of_them() -> None:
    idle = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0]
    window = [1.2, 1.3, 1.1, 1.25]
    loss = rank_loss(window, idle)
    assert loss is not None
    n, m = len(window), len(idle)
    variance = n * statistics.variance(window) + n * n * statistics.variance(idle) / m
    half = mean_ci([loss])
    assert half is not None
    # Welch's degrees of freedom lie between the smaller part's and the sum; so does the half-width's multiplier
    se = math.sqrt(variance)
    assert t_quantile_975(n + m - 2) * se <= half <= t_quantile_975(min(n, m) - 1) * se
    more = mean_ci([loss] * 4)  # four ranks with the same samples: the mean's variance is a quarter
    assert more is not None and more < half


def test_a_ci_that_contains_zero_is_possible_and_identical_steps_give_none_wide() -> None:
    noisy = write_timing(0, [rank([1.0, 1.3], [1.2, 0.9, 1.1, 1.0, 1.3, 0.8])])
    assert noisy.interference_ci_s is not None and abs(noisy.interference_s) < noisy.interference_ci_s
    exact = write_timing(0, [rank([2.0, 2.0], [2.0] * 6)])
    assert exact.interference_s == 0 and exact.interference_ci_s == 0


def test_a_rank_without_idle_steps_is_left_out_and_none_gives_no_figure() -> None:
    assert rank_loss([1.0], []) is None
    timing = write_timing(0, [rank([1.0], [])])
    assert timing.compute_slowdown is None and timing.interference_ci_s is None and timing.idle_step_s_mean is None


def test_bytes_and_the_compute_cpu_share_are_summed_over_ranks() -> None:
    ranks = [rank([1.0], [1.0, 1.0], compute_wall_s=1.0, compute_cpu_s=0.01, allreduce_bytes=4096),
             rank([1.0], [1.0, 1.0], compute_wall_s=1.0, compute_cpu_s=0.03, allreduce_bytes=4096)]
    timing = write_timing(0, ranks)
    assert timing.allreduce_bytes == 8192 and timing.compute_cpu_share == pytest.approx(0.02)
    assert timing.background_bytes == 2 << 20 and timing.background_GiBps == pytest.approx(2 / 1024)
