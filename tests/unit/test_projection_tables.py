"""Projections in the tables, from hand-made results with a known fixed and per-byte part: the cells' fitted
full-size time and band, calibration runs in the fit but not in the cells, the cost view on the same fit, and plain
scaling, labelled, where no fit exists."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from studyctl.analysis.projection import MAX_REACH
from studyctl.analysis.tables import build_tables
from studyctl.definition.points import Point
from tests.resultgen import make_point, write_result

GIB = 1 << 30
FIXED, S_PER_GIB = 0.05, 0.5  # 50 ms a checkpoint, 2 GiB/s per rank
SPREAD = (0.97, 1.0, 1.03)  # per repetition: the fit's residuals


def seconds(p: Point, nbytes: float) -> float:
    return FIXED + nbytes / p.world_size / GIB * S_PER_GIB


def write(study: Path, p: Point) -> None:
    nbytes = p.layout().total_bytes
    rate = nbytes / GIB / (seconds(p, nbytes) * SPREAD[p.repetition % 3])
    write_result(study, p, [rate] * p.checkpoint.writes, spread=0.0)


def point(scale: float, rep: int, role: str = "measure") -> Point:
    p = make_point(zero=3, rpn=2, rep=rep, scale=scale, reads=0)
    return p.model_copy(update={"role": role}) if role != "measure" else p


def study_dir(tmp_path: Path, calibration: bool) -> Path:
    study = tmp_path / "proj"
    study.mkdir()
    (study / "sweep.yaml").write_text("study: proj\n")
    for rep in range(3):
        write(study, point(0.001, rep))
    if calibration:
        for scale in (0.01, 0.1):
            for rep in range(2):
                write(study, point(scale, rep, "calibration"))
    return study


def test_a_cell_is_projected_from_the_fit_with_its_band_and_the_scale_it_rests_on(tmp_path: Path) -> None:
    tables = build_tables(study_dir(tmp_path, calibration=True))
    assert list(tables.summary["scale"]) == [0.001]  # calibration runs are no cells
    assert set(tables.checkpoints["role"]) == {"measure", "calibration"}  # but they are in the observations
    row = tables.summary.iloc[0].to_dict()
    exact = seconds(point(1.0, 0), row["nominal_checkpoint_bytes"])
    assert row["projected_full_size_s"] == pytest.approx(exact, rel=0.03)
    assert row["projected_full_size_s_lo"] < exact < row["projected_full_size_s_hi"]
    plain = row["nominal_checkpoint_bytes"] / GIB / row["bytes_over_time_GiBps"]
    assert plain > 1.5 * exact  # what plain scaling would have said: the fixed part grown with the bytes
    assert row["projection_scale_max"] == 0.1 and row["projection_reach"] == pytest.approx(10, rel=0.01)
    assert "fit of 7 runs at scales 0.001, 0.01, 0.1" in row["projection_basis"]
    assert row["projection_flag"] == ""  # 10× is within MAX_REACH
    assert MAX_REACH >= 10


def test_the_cost_view_uses_the_same_fit_and_carries_its_band(tmp_path: Path) -> None:
    tables = build_tables(study_dir(tmp_path, calibration=True))
    t = tables.training
    assert set(t["scale"]) == {0.001} and set(t["projection_basis"]) == {"fit (analysis.projection)"}
    exact = seconds(point(1.0, 0), float(t["nominal_checkpoint_bytes"].iloc[0]))
    assert t["blocking_s"].mean() == pytest.approx(exact, rel=0.03)  # each repetition's seconds × the fit's factor
    for r in t.to_dict("records"):
        assert r["blocking_s_lo"] < r["blocking_s"] < r["blocking_s_hi"]
        assert r["total_waste_lo"] <= r["total_waste"] <= r["total_waste_hi"]
        assert r["goodput_lo"] <= r["goodput"] <= r["goodput_hi"]
    cell = tables.training_cells.iloc[0]
    assert cell["blocking_s_lo"] < cell["blocking_s"] < cell["blocking_s_hi"]
    assert cell["projection_basis"] == "fit (analysis.projection)"


def test_without_a_second_scale_the_plain_figure_stays_labelled_and_flagged(tmp_path: Path) -> None:
    tables = build_tables(study_dir(tmp_path, calibration=False))
    row = tables.summary.iloc[0].to_dict()
    assert row["projected_full_size_s"] == pytest.approx(row["nominal_checkpoint_bytes"] / GIB
                                                         / row["bytes_over_time_GiBps"])
    assert math.isnan(row["projected_full_size_s_lo"]) and "plain scaling" in row["projection_basis"]
    assert "1000× beyond" in row["projection_flag"]
    t = tables.training
    assert set(t["projection_basis"]) == {"plain scaling (bytes ratio, no fit)"}
    assert t["blocking_s_lo"].isna().all()
