"""The worker's rounds of a probe (worker.ceiling_probes.repeat) on a real one-rank MPI world: the ramp runs
first and is not recorded, the recorded rounds stop at the cell's cap or when every rate is narrow."""

from __future__ import annotations

from mpi4py import MPI

from studyctl.definition.planning.ceilings import MIN_ROUNDS
from worker.ceiling_probes import repeat


def _probe(rates: list[float], seen: list[int]):  # type: ignore[no-untyped-def]
    def one(r: int) -> dict[str, float]:
        seen.append(r)
        return {"storage_write_GiBps": rates[r]}
    return one


def test_the_ramp_round_runs_first_and_is_left_out() -> None:
    seen: list[int] = []
    rates = [0.16, 0.70, 0.71, 0.70] + [0.5, 0.9] * 5  # a slow first round (the last point's write-back), then steady
    got = repeat(MPI.COMM_SELF, 60.0, _probe(rates, seen), ramp=1)
    assert seen == [0, 1, 2, 3] and got == {"storage_write_GiBps": [0.70, 0.71, 0.70]}  # narrow after the ramp
    seen.clear()
    got = repeat(MPI.COMM_SELF, 60.0, _probe(rates, seen))  # no ramp: the outlier is kept and the CI stays wide
    assert seen[:4] == [0, 1, 2, 3] and got["storage_write_GiBps"][0] == 0.16 and len(seen) > MIN_ROUNDS


def test_the_cells_cap_stops_rounds_that_never_narrow() -> None:
    seen: list[int] = []
    noisy = [0.3, 0.9] * 10
    got = repeat(MPI.COMM_SELF, 60.0, _probe(noisy, seen), max_rounds=4, ramp=1)
    assert seen == [0, 1, 2, 3, 4] and got["storage_write_GiBps"] == noisy[1:5]
