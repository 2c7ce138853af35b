"""The fit's band carried through the cost model: every figure's band holds its centre and keeps a width (Daly's
interval included), shares of wall time stay in [0, 1], and a measured restart's R moves with the restore's band."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from studyctl.analysis.training.cost import BAND_FIGURES, training_table
from studyctl.definition.inputs.training import TrainingSpec

SPEC = TrainingSpec.model_validate({"step_s": 0.5, "interval_steps": 120, "node_mtbf_h": 1000, "nodes": 16})
FACTOR, LOW, HIGH = 80.0, 20.0, 300.0  # a wide band: 4× either way


def rows(blocking: float = 0.5, interference: float | None = None, **extra: Any) -> list[dict[str, Any]]:
    return [dict(point_id=f"p{i}", strategy="sync", nodes=1, scale=0.01, repetition=i, model="m",
                 nominal_checkpoint_bytes=100e9, checkpoint_bytes=1e9, blocking_s=blocking * (1 + 0.1 * i),
                 interference_s=interference, nominal_restore_bytes=100e9, restore_bytes=1e9, restore_s=0.3,
                 nominal_restore_file_bytes=100e9, shared_bytes=1e9, tier_bytes=0, read_s=0.3, **extra)
            for i in range(3)]


def factors(n: int = 3) -> pd.DataFrame:
    return pd.DataFrame([(f"p{i}", phase, FACTOR, LOW, HIGH, "fit", 0.1, 10.0) for i in range(n)
                         for phase in ("write", "read")],
                        columns=["point_id", "phase", "fit_factor", "fit_factor_lo", "fit_factor_hi",
                                 "projection_basis", "projection_scale_max", "projection_reach"])


def test_every_band_holds_its_centre_and_keeps_a_width() -> None:
    t = training_table(rows(), SPEC, factors())
    for name in BAND_FIGURES:
        lo, mid, hi = (t[c].to_numpy(dtype=float) for c in (f"{name}_lo", name, f"{name}_hi"))
        assert (lo <= mid).all() and (mid <= hi).all(), name
        assert (lo < hi).all(), f"{name}: the band collapsed to one number"
    assert (t["daly_interval_s_lo"] > 0).all()
    assert t["checkpoint_cost_s_lo"].to_numpy() == pytest.approx(t["blocking_measured_s"].to_numpy() * LOW)
    assert t["goodput_hi"].max() <= 1.0 and t["total_waste_lo"].min() >= 0.0
    assert (t["write_scale_max"] == 0.1).all() and (t["write_reach"] == 10.0).all()


def test_a_negative_cost_wastes_nothing_and_goodput_stays_within_one() -> None:
    """Interference noise larger than a tiny blocking time: C < 0, which no share of wall time can be."""
    t = training_table(rows(blocking=0.001, interference=-0.01), SPEC, factors())
    assert (t["checkpoint_cost_s"] < 0).all()  # the signed mean, as measured
    for name in ("total_waste", "goodput"):
        for column in (name, f"{name}_lo", f"{name}_hi"):
            assert t[column].dropna().between(0.0, 1.0).all(), column  # no band where it has no width
    assert (t["goodput"] == 1.0).all()
    for name in ("daly_interval_s", "total_waste_at_daly"):  # no optimum at no cost: no figure, no band
        assert t[name].isna().all() and t[f"{name}_lo"].isna().all()


def test_a_measured_restarts_R_moves_with_the_restore_band() -> None:
    """R = launch + restore × the restore's factor + ready: its ends are the restore band's."""
    launch, restore, ready = 1.5, 0.2, 0.4
    made = rows(recovery="same", restart_launch_s=launch, restart_restore_s=restore, restart_ready_s=ready,
                restart_time_to_first_step_s=launch + restore + ready)
    t = training_table(made, SPEC, factors())
    assert t["restart_s"].to_numpy() == pytest.approx(np.full(3, launch + restore * FACTOR + ready))
    assert t["restart_s_lo"].to_numpy() == pytest.approx(np.full(3, launch + restore * LOW + ready))
    assert t["restart_s_hi"].to_numpy() == pytest.approx(np.full(3, launch + restore * HIGH + ready))


def test_without_a_fit_there_is_no_band_but_the_plain_reach_is_said() -> None:
    t = training_table(rows(), SPEC, None)
    assert t["checkpoint_cost_s_lo"].isna().all()
    assert t["write_reach"].to_numpy() == pytest.approx(np.full(3, 100.0)) and (t["write_scale_max"] == 0.01).all()


def test_a_cell_says_how_far_each_phase_reaches_and_flags_beyond_ten_times() -> None:
    from studyctl.analysis.training.cells import cost_cells

    far = factors().assign(projection_reach=50.0, projection_scale_max=0.002)
    made = [{**r, "cell_key": "c"} for r in rows()]
    cell = cost_cells(training_table(made, SPEC, far)).iloc[0]
    assert cell["write_reach"] == 50.0 and cell["write_scale_max"] == 0.002 and cell["write_fitted"]
    assert "C: fitted projection reaches 50× beyond the largest size measured (scale 0.002" in cell["flags"]
    assert "R's restore: fitted projection reaches 50×" in cell["flags"]
    near = cost_cells(training_table(made, SPEC, factors())).iloc[0]
    assert "reaches" not in near["flags"]
    plain = cost_cells(training_table(made, SPEC, None)).iloc[0]
    assert "C: plain scaling reaches 100× beyond the largest size measured (scale 0.01" in plain["flags"]
