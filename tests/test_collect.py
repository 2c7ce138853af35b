"""Collect: tables from real worker results and from hand-made edge cases; plots exist and are not blank."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest

from studyctl.collect import build_tables
from studyctl.dlio_import import import_dlio
from studyctl.errors import UserError
from studyctl.reporting import collect_study
from studyctl.stats import describe, ratio_ci, t_quantile_975

from .conftest import run_small_study


def copy_study(src: Path, dst_root: Path) -> Path:
    dst = dst_root / "results" / src.name
    shutil.copytree(src, dst)
    shutil.rmtree(dst / "tables", ignore_errors=True)
    shutil.rmtree(dst / "plots", ignore_errors=True)
    return dst


def assert_png_has_content(path: Path) -> None:
    assert path.stat().st_size > 10_000, path
    img = mpimg.imread(path)[..., :3]
    non_white = (img < 0.95).any(axis=-1).mean()
    assert non_white > 0.02, f"{path} is (almost) blank"
    assert img.std() > 0.05


def test_describe_matches_hand_computed() -> None:
    d = describe([1.0, 2.0, 3.0])
    assert d["n"] == 3 and d["mean"] == 2.0 and d["stdev"] == 1.0
    assert d["ci95"] == pytest.approx(4.303 / math.sqrt(3))
    one = describe([5.0])
    assert one["mean"] == 5.0 and math.isnan(one["stdev"]) and math.isnan(one["ci95"])
    assert t_quantile_975(40) == pytest.approx(2.021, abs=1e-3)
    assert t_quantile_975(120) == pytest.approx(1.980, abs=1e-3)
    r, lo, hi = ratio_ci(2.0, 0.1, 1.0, 0.05, 9)
    assert r == 0.5 and lo < 0.5 < hi


def test_tables_from_real_results(small_study: Path, tmp_path: Path) -> None:
    study = copy_study(small_study, tmp_path)
    out = collect_study(study)
    assert out.completed == 16 and not out.problems
    checkpoints = pd.read_parquet(study / "tables" / "checkpoints.parquet")
    assert len(checkpoints) == 16 * 4  # 16 points × (2 writes + 2 reads)
    assert set(checkpoints["phase"]) == {"write", "read"}
    summary = pd.read_csv(study / "tables" / "summary.csv")
    assert len(summary) == 8 * 2  # 8 cells × 2 phases
    assert (summary["n"] == 2).all()
    points = pd.read_csv(study / "tables" / "points.csv")
    cell = summary.iloc[0]
    reps = points[(points["cell_key"] == cell["cell_key"]) & (points["phase"] == cell["phase"])]
    assert len(reps) == 2
    assert cell["aggregate_GiBps_mean"] == pytest.approx(reps["aggregate_GiBps"].mean())
    assert cell["aggregate_GiBps_stdev"] == pytest.approx(reps["aggregate_GiBps"].std(ddof=1))
    assert cell["aggregate_GiBps_ci95"] == pytest.approx(12.706 * reps["aggregate_GiBps"].std(ddof=1) / math.sqrt(2))
    base = summary[summary["nodes"] == 1]
    assert (base["scaling_efficiency"] == 1.0).all()
    assert {"aggregate_GiBps_mean", "duration_s_mean", "per_node_GiBps", "bytes"} <= set(summary.columns)
    for plot in out.plots:
        assert_png_has_content(plot)
    names = {p.name for p in out.plots}
    assert {"bandwidth_gpt2-125m.png", "duration_gpt2-125m.png", "efficiency.png", "rank_spread.png",
            "io_mode.png"} <= names
    html = out.report_html.read_text()
    for plot in out.plots:
        assert f'src="plots/{plot.name}"' in html
    fstype = json.loads(next(study.glob("points/*/attempt-1/result.json")).read_text())["filesystem"]["fstype"]
    assert "Provenance" in html and f">{fstype}<" in html and "MPICH" in html


def test_recollect_is_incremental(small_study: Path, tmp_path: Path) -> None:
    study = copy_study(small_study, tmp_path)
    first = collect_study(study)
    assert not first.unchanged and first.files_read == 16
    again = collect_study(study)
    assert again.unchanged
    result = next(study.glob("points/*/attempt-1/result.json"))
    result.write_text(result.read_text())  # new mtime: re-read that one file only
    third = collect_study(study)
    assert not third.unchanged and third.files_read == 1 and third.files_cached == 15


def test_edge_cases_corrupt_invalid_one_repetition(small_study: Path, tmp_path: Path) -> None:
    study = copy_study(small_study, tmp_path)
    results = sorted(study.glob("points/*/attempt-1/result.json"))
    truncated, invalid, removed = results[0], results[1], results[2]
    truncated.write_text(truncated.read_text()[:500])
    data = json.loads(invalid.read_text())
    data["checkpoints"][0]["aggregate_GiBps"] = "fast"
    invalid.write_text(json.dumps(data))
    removed.unlink()
    tables = build_tables(study)
    reasons = {Path(p.path).parent.parent.name: p.reason for p in tables.problems}
    assert "not valid JSON" in reasons[truncated.parent.parent.name]
    assert "does not match the result schema" in reasons[invalid.parent.parent.name]
    assert len(tables.points["point_id"].unique()) == 13
    singles = tables.summary[tables.summary["n"] == 1]
    assert len(singles) > 0 and singles["aggregate_GiBps_ci95"].isna().all()
    out = collect_study(study)
    html = out.report_html.read_text()
    assert "Invalid result files" in html and "not valid JSON" in html
    for plot in out.plots:
        assert_png_has_content(plot)


def test_failed_points_and_missing_read_phase(tmp_path: Path) -> None:
    study = run_small_study(tmp_path, name="noreads", reads=0)
    # a failure: break one point's result and mark it failed the way the worker would
    (bad,) = list(study.glob("points/*/attempt-1/result.json"))[:1]
    from studyctl.backends.base import Update
    from studyctl.ledger import Ledger
    from studyctl.states import FailureClass, State

    point_id = bad.parent.parent.name
    bad.unlink()
    with Ledger(study / "ledger.sqlite") as ledger:
        ledger.new_attempts([(point_id, "local")])
        ledger.record_updates([Update(point_id, 2, State.FAILED, FailureClass.IO_ERROR, "disk on fire")])
    out = collect_study(study)
    assert out.failed == 1 and out.completed == 15
    summary = pd.read_csv(study / "tables" / "summary.csv")
    assert set(summary["phase"]) == {"write"}
    html = out.report_html.read_text()
    assert "disk on fire" in html
    assert f"studyctl sweep resubmit noreads --point {point_id}" in html
    md = out.report_md.read_text()
    assert "disk on fire" in md and "bandwidth_gpt2-125m.png" in md
    for plot in out.plots:
        assert_png_has_content(plot)


def test_import_dlio(tmp_path: Path, small_study: Path) -> None:
    run = tmp_path / "dlio_run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({
        "num_accelerators": 8, "num_hosts": 1, "workload": "llama_7b_zero3",
        "metric": {"checkpoint_size_GB": 87.86, "save_checkpoint_io_mean_GB_per_second": 2.0,
                   "save_checkpoint_duration_mean_seconds": 43.9}}))
    (run / "per_epoch_stats.json").write_text(json.dumps({
        "1": {"start": "x", "save_ckpt1": {"duration": "44.0", "throughput": 1.99},
              "load_ckpt1": {"duration": "40.0", "throughput": 2.19}},
        "2": {"save_ckpt2": {"duration": "43.0", "throughput": 2.04}}}))
    frame = import_dlio(run)
    assert list(frame["phase"]) == ["write", "read", "write"]
    assert (frame["tool"] == "dlio").all() and frame["nodes"].iloc[0] == 1 and frame["world_size"].iloc[0] == 8
    study = copy_study(small_study, tmp_path)
    out = collect_study(study, import_dlio=run)
    summary = pd.read_csv(study / "tables" / "summary.csv")
    dlio = summary[summary["tool"] == "dlio"]
    assert set(dlio["phase"]) == {"write", "read"}
    assert dlio[dlio["phase"] == "write"]["aggregate_GiBps_mean"].iloc[0] == pytest.approx((1.99 + 2.04) / 2)
    assert out.report_html.exists()
    with pytest.raises(UserError, match=r"no summary\.json"):
        import_dlio(tmp_path)
