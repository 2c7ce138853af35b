"""Least squares with every coefficient ≥ 0, exact for the few terms a time model has (no scipy in the stack).

The optimum of a least-squares problem under x ≥ 0 is the unconstrained least-squares solution on the set of its
positive coefficients (its KKT conditions), so with k terms it is the best of the at most 2^k − 1 subset
solutions that come out non-negative. For the 2–3 terms of a projection that is 3–7 small solves: simpler to
trust than an iterative active set, and exact.
"""

from __future__ import annotations

import itertools

import numpy as np

MAX_TERMS = 6  # 63 subsets; a model with more terms wants an iterative active set (Lawson–Hanson)


def nnls(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(coefficients ≥ 0, which are free) minimising |x·c − y|²; a coefficient at its bound is 0 and not free.
    Among subsets of equal residual the smaller is taken (a term that adds nothing is left out)."""
    k = x.shape[1]
    if k > MAX_TERMS:
        raise ValueError(f"nnls by subsets is for at most {MAX_TERMS} terms, got {k}")
    best: tuple[float, int, np.ndarray, np.ndarray] | None = None
    for size in range(1, k + 1):
        for subset in itertools.combinations(range(k), size):
            cols = list(subset)
            sub = x[:, cols]
            if np.linalg.matrix_rank(sub) < size:
                continue
            coef, *_ = np.linalg.lstsq(sub, y, rcond=None)
            if (coef < 0).any():
                continue
            ssr = float(np.sum((y - sub @ coef) ** 2))
            if best is None or ssr < best[0] * (1 - 1e-12) - 1e-300:
                full = np.zeros(k)
                full[cols] = coef
                free = np.zeros(k, dtype=bool)
                free[cols] = coef > 0
                best = (ssr, size, full, free)
    if best is None:
        return np.zeros(k), np.zeros(k, dtype=bool)
    return best[2], best[3]
