"""Least squares under c ≥ 0 by subsets: the unconstrained answer where it is non-negative, else the constrained
optimum (checked against the KKT conditions and a fine search), and a refusal beyond the terms it is for."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from studyctl.analysis.projection.nnls import MAX_TERMS, nnls


def test_a_non_negative_unconstrained_answer_is_returned_as_it_is() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0.1, 1.0, size=(20, 3))
    truth = np.array([0.5, 2.0, 1.0])
    coef, free = nnls(x, x @ truth)
    assert coef == pytest.approx(truth)
    assert free.tolist() == [True, True, True]


def test_a_negative_part_is_held_at_zero_and_the_rest_refitted() -> None:
    """Times that fall with size at the small end (noise) would give a negative fixed part; it stays 0."""
    x = np.column_stack([np.ones(4), np.array([1.0, 2.0, 3.0, 4.0])])
    y = np.array([0.9, 2.3, 3.6, 5.0])  # unconstrained: intercept −0.45, slope 1.37
    unconstrained, *_ = np.linalg.lstsq(x, y, rcond=None)
    assert unconstrained[0] < 0
    coef, free = nnls(x, y)
    assert coef[0] == 0.0 and not free[0] and free[1]
    assert coef[1] == pytest.approx(float(x[:, 1] @ y / (x[:, 1] @ x[:, 1])))


def test_it_meets_the_kkt_conditions_and_no_grid_point_does_better() -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        x = rng.uniform(0.0, 1.0, size=(8, 3))
        y = rng.normal(0.0, 1.0, size=8)
        coef, free = nnls(x, y)
        assert (coef >= 0).all()
        gradient = x.T @ (x @ coef - y)
        assert np.allclose(gradient[free], 0.0, atol=1e-9)  # free terms: stationary
        assert (gradient[~free] >= -1e-9).all()  # held terms: moving off 0 does not help
        best = float(np.sum((x @ coef - y) ** 2))
        grid = np.linspace(0.0, 3.0, 13)
        assert all(float(np.sum((x @ np.array(c) - y) ** 2)) >= best - 1e-9 for c in itertools.product(grid, repeat=3))


def test_more_terms_than_it_is_for_are_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        nnls(np.ones((10, MAX_TERMS + 1)), np.ones(10))
