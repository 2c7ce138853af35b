"""The projection benchmark's coverage line: every reference run counted against its own study's band, and the
binomial floor that says whether a count is consistent with a 95% band."""

from __future__ import annotations

import math

from benchmarks.projection_bench import PhaseResult, coverage, coverage_floor


def test_the_floor_is_the_fewest_a_true_95_percent_band_holds_with_probability_95_percent() -> None:
    for n in (4, 12, 16, 24):
        floor = coverage_floor(n)
        below = sum(math.comb(n, k) * 0.95 ** k * 0.05 ** (n - k) for k in range(floor))
        at = below + math.comb(n, floor) * 0.95 ** floor * 0.05 ** (n - floor)
        assert below <= 0.05 < at
    assert coverage_floor(16) == 14  # 12 of 16 (a run of the earlier bands) is too narrow for 95%


def test_each_reference_run_is_checked_against_its_band() -> None:
    write = PhaseResult("write", (10.0, 13.0), 11.0, 9.0, 12.0, 20.0, "fit", 10.0)  # one inside, one above
    read = PhaseResult("read", (4.0, 5.0), 5.1, 4.5, 6.0, 9.0, "fit", 10.0)  # one below, one inside
    lines = coverage([[write, read]])
    assert lines[0].startswith("# band coverage, write: 1 of 2") and "0 below it, 1 above" in lines[0]
    assert lines[1].startswith("# band coverage, read: 1 of 2") and "1 below it, 0 above" in lines[1]
    assert lines[2].startswith("# band coverage, both: 2 of 4") and "too narrow for 95%" in lines[2]
