"""The total-waste model against a numeric minimisation over the interval, not against its own formulas.

`numeric_optimum` searches the interval T by golden section over log T on Daly's complete model (the one
formula taken as given, checked on its own below against its no-failure limit and first-order expansion);
Young's and Daly's closed forms and the inverse `max_cost_at_total_waste` are then judged by what the search
finds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studyctl.definition.inputs import training as tc

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def numeric_optimum(cost_s: float, mtbf_s: float, restart_s: float = 0.0, lag_s: float = 0.0) -> tuple[float, float]:
    """(T, waste) minimising the total waste over T, by golden section on log T from 1e-9·M to 100·M."""
    def waste(log_t: float) -> float:
        return float(tc.total_waste_share(math.exp(log_t), cost_s, mtbf_s, restart_s, lag_s))

    lo, hi = math.log(1e-9 * mtbf_s), math.log(100.0 * mtbf_s)
    a, b = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    for _ in range(200):
        if waste(a) < waste(b):
            hi, b = b, a
            a = hi - GOLDEN * (hi - lo)
        else:
            lo, a = a, b
            b = lo + GOLDEN * (hi - lo)
    best = (lo + hi) / 2.0
    return math.exp(best), waste(best)


def test_numeric_search_finds_a_minimum_a_dense_grid_agrees_with() -> None:
    cost, mtbf, restart = 30.0, 7200.0, 120.0
    t, w = numeric_optimum(cost, mtbf, restart)
    grid = [10.0 * 1.001 ** i for i in range(12_000)]
    w_grid, t_grid = min((float(tc.total_waste_share(x, cost, mtbf, restart)), x) for x in grid)
    assert w <= w_grid + 1e-12
    assert t == pytest.approx(t_grid, rel=0.01)


@given(c_over_m=st.floats(1e-8, 1.99), restart_over_m=st.floats(0.0, 0.5), lag_over_m=st.floats(0.0, 0.2))
@settings(max_examples=150, deadline=None)
def test_daly_interval_is_close_to_the_numeric_optimum(c_over_m: float, restart_over_m: float,
                                                        lag_over_m: float) -> None:
    mtbf = 10_000.0
    cost = c_over_m * mtbf
    t, w = numeric_optimum(cost, mtbf, restart_over_m * mtbf, lag_over_m * mtbf)
    daly = tc.daly_interval_s(cost, mtbf)
    # Daly's expansion drifts as C approaches 2M (6% at C = 1.9M); within 1% up to C = M/2
    assert daly == pytest.approx(t, rel=0.01 if c_over_m <= 0.5 else 0.07)
    at_daly = tc.total_waste_share(daly, cost, mtbf, restart_over_m * mtbf, lag_over_m * mtbf)
    assert at_daly == pytest.approx(w, rel=1e-3)


@given(c_over_m=st.floats(1e-8, 1.99), restart_over_m=st.floats(0.0, 0.5))
@settings(max_examples=150, deadline=None)
def test_young_wastes_at_least_as_much_as_daly(c_over_m: float, restart_over_m: float) -> None:
    mtbf = 3600.0
    cost, restart = c_over_m * mtbf, restart_over_m * mtbf
    young = tc.total_waste_share(tc.young_interval_s(cost, mtbf), cost, mtbf, restart)
    daly = tc.total_waste_share(tc.daly_interval_s(cost, mtbf), cost, mtbf, restart)
    assert young >= daly - 1e-12


def test_daly_interval_is_the_mtbf_from_twice_the_mtbf_on() -> None:
    assert tc.daly_interval_s(2.0 * 500.0, 500.0) == 500.0
    assert tc.daly_interval_s(5000.0, 500.0) == 500.0


@given(mtbf_h=st.floats(0.2, 1000.0), target=st.floats(0.005, 0.5), restart_over_m=st.floats(0.0, 0.2),
       restore_per_cost=st.sampled_from([0.0, 1.0, 8.0]))
@settings(max_examples=150, deadline=None)
def test_inverse_holds_the_numerically_minimised_total_waste_at_the_target(
        mtbf_h: float, target: float, restart_over_m: float, restore_per_cost: float) -> None:
    mtbf = mtbf_h * tc.HOUR_S
    restart = restart_over_m * mtbf
    cost = tc.max_cost_at_total_waste(mtbf, target, restart, restore_per_cost=restore_per_cost)
    floor = tc.restart_floor_share(restart, mtbf)
    if cost == 0.0:  # unreachable: the restarts alone waste about as much as the target, or more
        assert floor >= target * 0.999
        return
    _, waste = numeric_optimum(cost, mtbf, restart + restore_per_cost * cost)
    assert waste == pytest.approx(target, rel=0.02)
    assert waste <= target * (1 + 1e-9), "the answer may not exceed the target"
    _, over = numeric_optimum(1.05 * cost, mtbf, restart + restore_per_cost * 1.05 * cost)
    assert over > waste, "the largest such cost: 5% more wastes more"


def test_restarts_alone_over_the_target_have_no_answer() -> None:
    mtbf = 2 * tc.HOUR_S
    restart = 600.0  # 1 − e^(−600/7200) = 8.0% before any checkpoint
    assert tc.restart_floor_share(restart, mtbf) == pytest.approx(0.08, abs=0.001)
    assert tc.max_cost_at_total_waste(mtbf, 0.05, restart) == 0.0
    assert tc.max_cost_at_total_waste(mtbf, 0.10, restart) > 0.0
    _, w = numeric_optimum(1e-6, mtbf, restart)
    assert w == pytest.approx(float(tc.restart_floor_share(restart, mtbf)), rel=1e-3)


@given(interval=st.floats(1.0, 1e5), cost=st.floats(1e-3, 1e4))
def test_without_failures_the_waste_is_the_checkpoint_share(interval: float, cost: float) -> None:
    share = cost / (interval + cost)
    assert tc.total_waste_share(interval, cost, None) == pytest.approx(share, rel=1e-12)
    assert tc.total_waste_share(interval, cost, math.inf) == pytest.approx(share, rel=1e-12)
    assert tc.total_waste_share(interval, cost, 1e20) == pytest.approx(share, rel=1e-6)  # M → ∞
    assert tc.checkpoint_share(interval, cost) == pytest.approx(share, rel=1e-12)


def test_first_order_waste_is_checkpoints_plus_rework_plus_restart() -> None:
    """Small C, T, R against M: W ≈ C/T + (T/2 + C + R)/M, the breakdown's terms."""
    cost, interval, mtbf, restart = 2.0, 600.0, 1e6, 50.0
    first_order = cost / interval + (interval / 2 + cost + restart) / mtbf
    assert tc.total_waste_share(interval, cost, mtbf, restart) == pytest.approx(first_order, rel=0.01)
    parts = (tc.checkpoint_share(interval, cost) + tc.rework_share(interval, cost, mtbf)
             + tc.restart_share(restart, mtbf))
    assert parts == pytest.approx(first_order, rel=0.01)


def test_columns_give_what_scalars_give() -> None:
    cost = np.array([1.0, 30.0, 5000.0])
    mtbf = np.array([3600.0, np.inf, 2000.0])
    waste = tc.total_waste_share(np.array([600.0, 600.0, 600.0]), cost, mtbf, 60.0)
    for i in range(3):
        assert waste[i] == pytest.approx(tc.total_waste_share(600.0, float(cost[i]), float(mtbf[i]), 60.0), rel=1e-12)
    daly = tc.daly_interval_s(cost, np.array([3600.0, 3600.0, 2000.0]))
    assert daly[2] == 2000.0 and daly[0] == pytest.approx(tc.daly_interval_s(1.0, 3600.0), rel=1e-12)


@pytest.mark.parametrize("cost", [0.0, -0.5])
def test_a_cost_below_zero_has_no_optimal_interval_for_floats_and_columns(cost: float) -> None:
    """Signed interference can outweigh a tiny blocking time in one repetition: no optimum, not a crash."""
    mtbf = 3600.0
    assert math.isnan(tc.young_interval_s(cost, mtbf)) and math.isnan(tc.daly_interval_s(cost, mtbf))
    columns = tc.daly_interval_s(np.array([cost, 10.0]), np.array([mtbf, mtbf]))
    assert math.isnan(columns[0]) and columns[1] == pytest.approx(tc.daly_interval_s(10.0, mtbf))
    young = tc.young_interval_s(np.array([cost, 10.0]), np.array([mtbf, mtbf]))
    assert math.isnan(young[0]) and young[1] == pytest.approx(math.sqrt(2 * 10.0 * mtbf))
