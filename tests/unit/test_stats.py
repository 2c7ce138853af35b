"""Statistics over repetitions: Student t intervals, total-over-total with its ratio-estimator interval."""

from __future__ import annotations

import math

import pytest

from studyctl.analysis.stats import describe, ratio_ci, t_quantile_975, total_over_total


def test_describe_matches_hand_computed() -> None:
    d = describe([1.0, 2.0, 3.0])
    assert d["n"] == 3 and d["mean"] == 2.0 and d["stdev"] == 1.0
    assert d["ci95"] == pytest.approx(4.303 / math.sqrt(3))
    one = describe([5.0])
    assert one["mean"] == 5.0 and math.isnan(one["stdev"]) and math.isnan(one["ci95"])
    assert describe([])["n"] == 0
    assert t_quantile_975(40) == pytest.approx(2.021, abs=1e-3)
    assert t_quantile_975(120) == pytest.approx(1.980, abs=1e-3)


def test_t_quantiles() -> None:
    assert t_quantile_975(1) == pytest.approx(12.706)
    assert t_quantile_975(40) == pytest.approx(2.021, abs=1e-3)
    assert t_quantile_975(120) == pytest.approx(1.980, abs=1e-3)
    assert math.isnan(t_quantile_975(0))


def test_total_over_total_is_not_the_mean_of_rates() -> None:
    # 1 GiB at 1 GiB/s and 1 GiB at 4 GiB/s: mean of rates 2.5, total bytes / total time 2 / 1.25 = 1.6
    res = total_over_total([1.0, 1.0], [1.0, 0.25])
    assert res["value"] == pytest.approx(1.6) and res["n"] == 2
    se = math.sqrt(((1 - 1.6 * 1.0) ** 2 + (1 - 1.6 * 0.25) ** 2) / 2) / 0.625
    assert res["se"] == pytest.approx(se)
    assert res["ci95"] == pytest.approx(12.706 * se)
    assert res["ci95_low"] == 0.0  # 1.6 - 12.706 se is below 0: a rate is never negative
    assert total_over_total([1.0, 1.1], [1.0, 1.0])["ci95_low"] > 0


def test_total_over_total_edge_cases() -> None:
    one = total_over_total([2.0], [1.0])
    assert one["value"] == 2.0 and math.isnan(one["ci95"])
    same = total_over_total([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])  # identical rates: no spread
    assert same["value"] == pytest.approx(2.0) and same["ci95"] == pytest.approx(0.0)
    assert math.isnan(total_over_total([], [])["value"])


def test_ratio_ci() -> None:
    r, lo, hi = ratio_ci(2.0, 0.1, 1.0, 0.05, 9)
    assert r == 0.5 and lo < 0.5 < hi
    factor = math.exp(t_quantile_975(9) * math.sqrt((0.1 / 2) ** 2 + (0.05 / 1) ** 2))
    assert (lo, hi) == pytest.approx((0.5 / factor, 0.5 * factor))
    r, lo, hi = ratio_ci(1.0, 0.5, 1.0, 0.5, 2)  # very noisy: wide, but never below 0
    assert 0 < lo < 1 < hi and lo * hi == pytest.approx(1.0)
    r, lo, hi = ratio_ci(2.0, math.nan, 3.0, 0.1, 1)
    assert r == 1.5 and math.isnan(lo) and math.isnan(hi)
