"""Projections in the tables, from hand-made results with a known fixed and per-byte part: the cells' fitted
full-size time and band, calibration runs in the fit but not in the cells, the cost view on the same fit, and plain
scaling, labelled, where no fit exists."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from studyctl.analysis.projection.fit import MAX_REACH
from studyctl.analysis.tables import build_tables
from studyctl.definition.checkpoint.points import Point
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


def test_plan_predicts_full_size_from_an_earlier_run_else_says_what_calibration_will_measure(tmp_path: Path) -> None:
    from studyctl.analysis.projection.plan import projection_lines
    from studyctl.analysis.tables import write_tables
    from studyctl.attempt.paths import StudyPaths
    from studyctl.definition.planning.calibration import shape_calibrations
    from studyctl.definition.planning.expand import iter_points
    from studyctl.definition.planning.sweep import parse_sweep

    sweep = parse_sweep({"study": "proj", "models": ["gpt2-125m"], "repetitions": 3,
                         "matrix": {"zero_stage": 3, "ranks_per_node": 2},
                         "filesystems": {"scratch": {"path": str(tmp_path / "fs")}},
                         "checkpoint": {"scale": 0.001, "block_mib": 4, "buffer_mib": 4, "reads": 0},
                         "calibration": {"budget_share": 10}},
                        Path("proj.yaml"))
    shapes = shape_calibrations(sweep, iter_points(sweep))
    before = projection_lines(shapes, None)
    assert len(before) == 1 and "calibration adds 4 points of gpt2-125m ZeRO-3 at scales 0.01, 0.1" in before[0]
    study = study_dir(tmp_path, calibration=True)
    paths = StudyPaths(study)
    paths.tables.mkdir(parents=True, exist_ok=True)
    write_tables(build_tables(study), paths)
    after = projection_lines(shapes, paths.tables / "checkpoints.parquet")
    exact = seconds(point(1.0, 0), point(1.0, 0).layout().total_bytes)
    assert len(after) == 1 and after[0].startswith(f"{shapes[0].shape} write: gpt2-125m ZeRO-3 at full size ~")
    low, high = (float(x) for x in re.search(r"\[([\d.]+), ([\d.]+)\] \(95%\)", after[0]).groups())  # type: ignore[union-attr]
    assert low - 0.05 <= exact <= high + 0.05 and "scales 0.001, 0.01, 0.1" in after[0]


def test_the_report_shows_the_band_the_scale_and_the_reach_flag(tmp_path: Path) -> None:
    from studyctl.analysis.collect import collect

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fitted = collect(study_dir(tmp_path / "a", calibration=True)).report_md.read_text()  # type: ignore[union-attr]
    assert "fit ≤ scale 0.1" in fitted and "1000× beyond" not in fitted
    plain = collect(study_dir(tmp_path / "b", calibration=False)).report_md.read_text()  # type: ignore[union-attr]
    assert " plain |" in plain and "projection reaches 1000× beyond the largest size measured" in plain


def test_the_reports_cost_table_shows_each_figures_band_its_scale_and_reach(tmp_path: Path) -> None:
    """The cost table as the README promises: per figure its band, and per projected phase the largest scale it
    rests on and its reach; no band of seconds reaches 0 s."""
    from studyctl.analysis.collect import collect

    study = study_dir(tmp_path, calibration=True)
    (study / "sweep.yaml").write_text("study: proj\ntraining: {node_mtbf_h: 1000, nodes: 1000}\n")
    report = collect(study).report_md
    assert report is not None
    md = report.read_text()
    section = md.split("## What checkpoints cost training", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in section.splitlines() if line.startswith("| ") and "cost C (s)" in line)
    row = next(line for line in section.splitlines() if line.startswith("| ") and line != header
               and "---" not in line)
    cells = dict(zip(header.split(" | "), row.split(" | "), strict=True))
    for figure in ("blocked (s)", "cost C (s)", "total waste at the interval", "Daly's interval (s)", "goodput"):
        band = re.search(r"\[([\d.]+)%?, ([\d.]+)%?\]", cells[figure])
        assert band is not None, f"{figure}: no band in {cells[figure]!r}"
        assert float(band.group(1)) < float(band.group(2))
    low_c = float(re.search(r"\[([\d.]+),", cells["cost C (s)"]).group(1))  # type: ignore[union-attr]
    assert low_c > 0
    assert "C fit ≤ scale 0.1, reach 10×" in cells["full size from"]
    assert "[" not in cells["restart R (s)"]  # no restore measured: R is nothing projected, so no band
