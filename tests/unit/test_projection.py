"""The fit behind projections to full size: known fixed, per-file and per-byte parts come back, and its band covers."""

from __future__ import annotations

import math
import random

import pytest

from studyctl.analysis.projection.fit import MAX_REACH, Observation, fit, plain_projection
from studyctl.units import GIB

FIXED, PER_FILE, S_PER_GIB = 0.030, 0.004, 0.5  # 30 ms, 4 ms a file, 2 GiB/s per rank
SCALES = (0.001, 0.01, 0.1)
FULL_BYTES = 10 * GIB  # per rank at scale 1


def truth(files: float, nbytes: float) -> float:
    return FIXED + PER_FILE * files + S_PER_GIB * nbytes / GIB


def runs(files: float, noise: float = 0.0, rng: random.Random | None = None, reps: int = 2) -> list[Observation]:
    rng = rng or random.Random(0)
    return [Observation(files, s * FULL_BYTES, truth(files, s * FULL_BYTES) * (1 + rng.gauss(0, noise)), s)
            for s in SCALES for _ in range(reps)]


def test_one_layout_recovers_the_bandwidth_and_one_intercept_for_fixed_and_per_file_parts() -> None:
    f = fit(runs(files=3))
    assert f is not None and not f.separable  # one file count: fixed and per-file parts cannot be told apart
    assert f.coef[0] == pytest.approx(FIXED + 3 * PER_FILE)
    assert f.coef[1] == 0.0
    assert f.bandwidth_GiBps == pytest.approx(1 / S_PER_GIB)
    p = f.predict(3, FULL_BYTES)
    assert p.seconds == pytest.approx(truth(3, FULL_BYTES))
    assert "one intercept" in p.basis and "0.001, 0.01, 0.1" in p.basis
    assert p.largest_scale == 0.1 and p.reach == pytest.approx(10)


def test_layouts_of_other_file_counts_separate_the_fixed_and_per_file_parts() -> None:
    f = fit(runs(files=2) + runs(files=40))
    assert f is not None and f.separable
    assert f.coef == pytest.approx((FIXED, PER_FILE, S_PER_GIB))
    assert f.predict(17, FULL_BYTES).seconds == pytest.approx(truth(17, FULL_BYTES))


def test_the_fit_differs_from_plain_scaling_where_fixed_costs_dominate_the_small_run() -> None:
    """Plain scaling (bytes over the smallest run's bandwidth) overstates the full-size time; the fit does not."""
    small = SCALES[0] * FULL_BYTES
    plain = plain_projection(FULL_BYTES, small / GIB / truth(3, small), SCALES[0])
    f = fit(runs(files=3))
    assert plain is not None and f is not None
    exact = truth(3, FULL_BYTES)
    assert plain.seconds > 1.5 * exact
    assert f.predict(3, FULL_BYTES).seconds == pytest.approx(exact)
    assert math.isnan(plain.low_s) and "plain scaling" in plain.basis and plain.beyond_reach


def test_the_band_covers_the_truth_under_noise() -> None:
    """5% noise per run: the 95% prediction band at full size holds the true time in about 95% of fits, and a fit
    from more repetitions has a narrower band."""
    rng = random.Random(21)
    covered, widths = 0, {2: [], 6: []}  # type: ignore[var-annotated]
    trials = 300
    for i in range(trials):
        reps = 2 if i % 2 else 6
        f = fit(runs(files=3, noise=0.05, rng=rng, reps=reps))
        assert f is not None
        p = f.predict(3, FULL_BYTES)
        # one more run at full size, noisy as the others: what a prediction interval is about
        actual = truth(3, FULL_BYTES) * (1 + rng.gauss(0, 0.05))
        covered += p.low_s <= actual <= p.high_s
        widths[reps].append(p.high_s - p.low_s)
    assert 0.88 <= covered / trials <= 0.995
    assert sum(widths[6]) / len(widths[6]) < sum(widths[2]) / len(widths[2])


def test_no_fit_from_one_size_or_without_a_residual() -> None:
    one_size = [Observation(3, GIB, 1.0, 0.1), Observation(3, GIB, 1.1, 0.1)]
    assert fit(one_size) is None
    exact_two = [Observation(3, GIB, 1.0, 0.1), Observation(3, 2 * GIB, 1.5, 0.2)]
    assert fit(exact_two) is None  # two runs, two terms: no degree of freedom for a band
    assert fit([*exact_two, Observation(3, 2 * GIB, 1.6, 0.2)]) is not None


def test_a_projection_far_beyond_the_largest_measured_size_is_flagged() -> None:
    f = fit(runs(files=3))
    assert f is not None
    assert not f.predict(3, MAX_REACH * 0.1 * FULL_BYTES).beyond_reach
    assert f.predict(3, MAX_REACH * 0.2 * FULL_BYTES).beyond_reach


def test_layouts_of_one_scale_are_one_size_not_a_fit() -> None:
    """ZeRO-1 and ZeRO-3 of one model at one scale (a real Slurm study): mean bytes per rank 0.25 B apart are
    one size; no fit is made from them (it was a singular system)."""
    from studyctl.analysis.projection.fit import Observation, fit

    runs = [(2.0, 43558540.0, 0.194477), (1.25, 43558540.25, 0.129538), (2.0, 43558540.0, 0.204629),
            (1.25, 43558540.25, 0.132575)]
    assert fit([Observation(f, b, s, 0.1) for f, b, s in runs]) is None


def test_repetitions_weigh_the_same_whatever_their_own_time() -> None:
    """Two repetitions per size, one 30% fast and one 30% slow: the fit goes through their mean (weighing each by
    its own time would pull it towards the fast one)."""
    obs = [Observation(3, s * FULL_BYTES, truth(3, s * FULL_BYTES) * k, s) for s in SCALES for k in (0.7, 1.3)]
    f = fit(obs)
    assert f is not None
    assert f.predict(3, FULL_BYTES).seconds == pytest.approx(truth(3, FULL_BYTES))


def test_no_part_is_negative_and_one_held_at_zero_is_said() -> None:
    """Times with no fixed part, the smallest size measured slow: unconstrained, the intercept comes out negative
    (and the per-file part with it); here each part is ≥ 0 and the basis names the one held at 0."""
    rng = random.Random(3)
    held = 0
    for _ in range(100):
        obs = [Observation(files, s * FULL_BYTES, S_PER_GIB * s * FULL_BYTES / GIB * (1 + rng.gauss(0, 0.1)), s)
               for files in (2, 40) for s in SCALES for _ in range(2)]
        f = fit(obs)
        assert f is not None
        assert min(f.coef) >= 0.0
        p = f.predict(17, FULL_BYTES)
        held += "at 0" in p.basis
        assert 0 < p.low_s < p.seconds < p.high_s
    assert held > 0


def test_the_band_never_reaches_zero_and_holds_its_centre() -> None:
    """30% noise per run and a projection far beyond what was measured: the band is wide, a factor either way,
    never 0 s at its low end."""
    rng = random.Random(5)
    for _ in range(100):
        f = fit(runs(files=3, noise=0.3, rng=rng))
        assert f is not None
        p = f.predict(3, 10 * FULL_BYTES)
        assert 0 < p.low_s < p.seconds < p.high_s
        assert p.seconds / p.low_s == pytest.approx(p.high_s / p.seconds)


def test_a_part_held_at_zero_keeps_its_upside_in_the_band() -> None:
    """Times that do not grow with the size measured (noise over a fixed cost): the per-byte part is held at 0,
    but the data cannot rule a positive one out, so the band's upper end beyond the measured sizes says so."""
    times = {0.001: (5.1, 2.8, 8.3), 0.002: (5.1,)}  # as a loaded disk gave them: 2 sizes, one fixed cost
    obs = [Observation(2, s * FULL_BYTES, t, s) for s, ts in times.items() for t in ts]
    f = fit(obs)
    assert f is not None and f.coef[2] == 0.0 and f.free[2] is False
    p = f.predict(2, FULL_BYTES)  # 500× beyond
    assert "per-byte part at 0" in p.basis
    assert p.seconds == pytest.approx(f.coef[0])
    assert 0 < p.low_s < p.seconds and 10 * p.seconds < p.high_s
