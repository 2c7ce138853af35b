"""Collect: tables from real worker results and from hand-made edge cases; plots exist and are not blank."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest

from studyctl.analysis.collect import build_tables
from studyctl.analysis.dlio.importer import import_dlio
from studyctl.api import collect as collect_study
from studyctl.errors import UserError
from studyctl.units import GIB
from tests.conftest import run_small_study


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
    gib, secs = reps["total_bytes"] / GIB, reps["total_time_s"]
    headline = gib.sum() / secs.sum()  # total bytes / total time over both repetitions' checkpoints
    assert cell["bytes_over_time_GiBps"] == pytest.approx(headline)
    se = math.sqrt(((gib - headline * secs) ** 2).sum() / 2) / secs.mean()  # ratio estimator, n = 2
    assert cell["bytes_over_time_GiBps_ci95"] == pytest.approx(12.706 * se)
    cps = checkpoints[(checkpoints["cell_key"] == cell["cell_key"]) & (checkpoints["phase"] == cell["phase"])]
    assert cell["mean_of_rates_GiBps"] == pytest.approx(cps["aggregate_GiBps"].mean())
    base = summary[summary["nodes"] == 1]
    assert (base["scaling_efficiency"] == 1.0).all()
    assert {"bytes_over_time_GiBps", "mean_of_rates_GiBps", "duration_s_mean", "per_node_GiBps", "bytes",
            "nominal_checkpoint_bytes", "projected_full_size_s", "flags"} <= set(summary.columns)
    for plot in out.plots:
        assert_png_has_content(plot.path)
    names = {p.path.name for p in out.plots}
    assert {"bandwidth_gpt2-125m.png", "duration_gpt2-125m.png", "efficiency_gpt2-125m.png",
            "rank_spread.png", "io_mode.png"} <= names
    html = out.report_html.read_text()
    for plot in out.plots:
        assert f'src="plots/{plot.path.name}"' in html
    first = next(study.glob("points/*/attempt-1/result.json"))
    fstype = json.loads(first.read_text())["filesystem"]["fstype"]
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
    assert len(singles) > 0 and singles["bytes_over_time_GiBps_ci95"].isna().all()
    out = collect_study(study)
    html = out.report_html.read_text()
    assert "Unusable result files" in html and "not valid JSON" in html
    for plot in out.plots:
        assert_png_has_content(plot.path)


def test_failed_points_and_missing_read_phase(tmp_path: Path) -> None:
    study = run_small_study(tmp_path, name="noreads", reads=0)
    # a failure: break one point's result and mark it failed the way the worker would
    (bad,) = list(study.glob("points/*/attempt-1/result.json"))[:1]
    from studyctl.attempt.records import Update
    from studyctl.states import FailureClass, State
    from studyctl.study.ledger import Ledger

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
        assert_png_has_content(plot.path)


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
    assert (frame["tool"] == "dlio").all()
    assert frame["nodes"].iloc[0] == 1 and frame["world_size"].iloc[0] == 8
    study = copy_study(small_study, tmp_path)
    out = collect_study(study, import_dlio=[run])
    summary = pd.read_csv(study / "tables" / "summary.csv")
    dlio = summary[summary["tool"] == "dlio"]
    assert set(dlio["phase"]) == {"write", "read"}
    # no start/end stamps: a checkpoint's time is the slowest rank's duration; total bytes / total time
    write = dlio[dlio["phase"] == "write"].iloc[0]
    assert write["bytes_over_time_GiBps"] == pytest.approx(2 * 87.86 / (44.0 + 43.0), rel=1e-4)
    assert write["mean_of_rates_GiBps"] == pytest.approx((87.86 / 44.0 + 87.86 / 43.0) / 2, rel=1e-4)
    assert "DLIO, warm reads, no fsync" in write["flags"]
    assert out.report_html.exists()
    with pytest.raises(UserError, match=r"no summary\.json"):
        import_dlio(tmp_path)


# ------------------------------------------------------------------ generated result files (no MPI)
from studyctl.analysis.collect import PointStatus, collect  # noqa: E402
from tests.resultgen import make_point, scaling_study, write_error, write_result  # noqa: E402

NBYTES = make_point(nodes=1).layout().total_bytes  # resultgen's default: the point's layout


def hand_study(root: Path) -> tuple[Path, dict[str, list]]:
    """Two cells of one series (1 and 2 nodes), three repetitions each, known bandwidths."""
    study = root / "results" / "hand"
    one = [make_point(nodes=1, rep=r) for r in range(3)]
    two = [make_point(nodes=2, rep=r) for r in range(3)]
    for p, w in zip(one, ([1.0, 3.0], [4.0, 4.0], [5.0, 7.0]), strict=True):  # point means 2, 4, 6
        write_result(study, p, w, [2 * x for x in w])
    for p, w in zip(two, ([6.0, 6.0], [6.0, 6.0], [6.0, 6.0]), strict=True):  # constant: stdev 0
        write_result(study, p, w, [2 * x for x in w])
    return study, {"one": one, "two": two}


def test_summary_stats_match_hand_computed_values(tmp_path: Path) -> None:
    study, _ = hand_study(tmp_path)
    res = collect(study)
    assert res.points == 6 and not res.problems and res.cells == 4
    summary = pd.read_parquet(study / "tables" / "summary.parquet")
    w1 = summary[(summary["nodes"] == 1) & (summary["phase"] == "write")].iloc[0]
    assert w1["n"] == 3 and w1["checkpoints"] == 6
    # 0.25 GiB per checkpoint; repetitions at 1 and 3, 4 and 4, 5 and 7 GiB/s: times per repetition
    times = [0.25 / 1 + 0.25 / 3, 0.25 / 4 * 2, 0.25 / 5 + 0.25 / 7]
    headline = 1.5 / sum(times)  # total bytes / total time: 2.757 GiB/s, not the mean of rates (4.0)
    assert w1["bytes_over_time_GiBps"] == pytest.approx(headline)
    assert w1["mean_of_rates_GiBps"] == pytest.approx(4.0)
    se = math.sqrt(sum((0.5 - headline * t) ** 2 for t in times) / (3 * 2)) / (sum(times) / 3)
    assert w1["bytes_over_time_GiBps_ci95"] == pytest.approx(4.303 * se, rel=1e-4)
    assert w1["bytes_over_time_GiBps_ci95_low"] == pytest.approx(max(0.0, headline - 4.303 * se), abs=1e-4)
    assert (w1["bytes_over_time_GiBps_rep_min"], w1["bytes_over_time_GiBps_rep_max"]) == \
        pytest.approx((0.5 / times[0], 0.5 / times[2]))
    # duration: the slowest rank's time per checkpoint, mean over checkpoints, then over repetitions
    g = NBYTES / (1 << 30)  # GiB per checkpoint of the 1-node points
    durs = [(g + g / 3) / 2, g / 4, (g / 5 + g / 7) / 2]
    assert w1["duration_s_mean"] == pytest.approx(sum(durs) / 3)
    assert w1["per_node_GiBps"] == pytest.approx(headline)
    w2 = summary[(summary["nodes"] == 2) & (summary["phase"] == "write")].iloc[0]
    assert w2["bytes_over_time_GiBps"] == pytest.approx(6.0) and w2["bytes_over_time_GiBps_ci95"] == 0
    assert w2["per_node_GiBps"] == pytest.approx(3.0)
    # every rank writes (ZeRO-1): 2 → 4 ranks moving bytes, so the ideal doubles
    assert w2["ideal_GiBps"] == pytest.approx(2 * headline) and w2["baseline_nodes"] == 1
    assert w1["scaling_efficiency"] == pytest.approx(1.0)
    assert w2["scaling_efficiency"] == pytest.approx(6.0 / (2 * headline))
    r1 = summary[(summary["nodes"] == 1) & (summary["phase"] == "read")].iloc[0]
    assert r1["bytes_over_time_GiBps"] == pytest.approx(2 * headline)
    assert r1["mean_of_rates_GiBps"] == pytest.approx(8.0)
    # tidy tables: one row per point × checkpoint × phase, units in the names, CSV = Parquet
    cps = pd.read_csv(study / "tables" / "checkpoints.csv")
    assert len(cps) == 6 * 4
    assert {"aggregate_GiBps", "duration_s", "bytes", "attempt", "tool"} <= set(cps.columns)
    assert (cps["tool"] == "studyctl").all() and (cps[cps["nodes"] == 1]["bytes"] == NBYTES).all()
    assert len(pd.read_parquet(study / "tables" / "checkpoints.parquet")) == len(cps)
    ranks = pd.read_parquet(study / "tables" / "ranks.parquet")
    assert len(ranks) == 3 * 4 * 2 + 3 * 4 * 4  # points × checkpoints × ranks (2 per node)


def test_latest_completed_attempt_wins_and_keeps_its_number(tmp_path: Path) -> None:
    study = tmp_path / "results" / "attempts"
    p = make_point()
    write_result(study, p, [1.0], attempt=1)
    write_result(study, p, [2.0], attempt=2)
    newest = study / "points" / p.point_id / "attempt-3" / "result.json"
    newest.parent.mkdir()
    newest.write_text('{"schema_version": 1, "study": "attem')  # attempt 3 died mid-write
    q = make_point(nodes=2)
    write_result(study, q, [3.0], attempt=1)
    write_error(study, q, 2, "io_error", "ENOSPC after 3 of 10 checkpoints")  # latest failed: use attempt 1
    res = collect(study)
    cps = pd.read_csv(study / "tables" / "checkpoints.csv")
    row = cps[cps["point_id"] == p.point_id].iloc[0]
    assert row["attempt"] == 2 and row["aggregate_GiBps"] == pytest.approx(2.0)
    assert cps[cps["point_id"] == q.point_id].iloc[0]["attempt"] == 1
    assert [(x.point_id, x.attempt) for x in res.problems] == [(p.point_id, 3)]
    assert "not valid JSON" in res.problems[0].reason
    assert not res.failures  # q has a usable result, so its failed retry is not a failure of the point


def test_invalid_results_are_listed_and_the_rest_collected(tmp_path: Path) -> None:
    study = tmp_path / "results" / "broken"
    good = [make_point(rep=r) for r in range(2)]
    for p in good:
        write_result(study, p, [1.0, 1.2])
    truncated, schema, empty, wrong, failed, missing = (make_point(nodes=n) for n in (2, 3, 4, 5, 6, 7))
    path = write_result(study, truncated, [1.0])
    path.write_text(path.read_text()[:300])
    path = write_result(study, schema, [1.0])
    data = json.loads(path.read_text())
    data["checkpoints"][0]["aggregate_GiBps"] = "fast"
    del data["provenance"]
    path.write_text(json.dumps(data))
    write_result(study, empty, [1.0]).write_text("")
    path = write_result(study, wrong, [1.0])
    path.write_text(path.read_text().replace(wrong.point_id, "000000000000", 1))
    write_error(study, failed, 1, "insufficient_space", "needs 12 GiB, 3 GiB free")
    statuses = [PointStatus(p.point_id, "COMPLETED", 1) for p in good]
    statuses += [PointStatus(missing.point_id, "COMPLETED", 1),
                 PointStatus(failed.point_id, "FAILED", 1, failure_reason="insufficient_space: needs 12 GiB")]
    res = collect(study, statuses)
    reasons = {x.point_id: x.reason for x in res.problems}
    assert "not valid JSON" in reasons[truncated.point_id]
    assert "does not match the result schema" in reasons[schema.point_id]
    assert "more" in reasons[schema.point_id]
    assert reasons[empty.point_id] == "empty file"
    assert "holds point 000000000000" in reasons[wrong.point_id]
    assert "no result file" in reasons[missing.point_id]
    assert [(f.point_id, f.failure_class) for f in res.failures] == [(failed.point_id, "insufficient_space")]
    assert res.points == 2
    summary = pd.read_csv(study / "tables" / "summary.csv")
    assert len(summary) == 1 and summary["n"].iloc[0] == 2
    problems = json.loads((study / "tables" / "problems.json").read_text())
    assert len(problems["invalid_results"]) == 5 and len(problems["worker_errors"]) == 1


def test_one_repetition_missing_read_phase_single_node_count(tmp_path: Path) -> None:
    study = tmp_path / "results" / "thin"
    for zero in (1, 3):
        write_result(study, make_point(zero=zero, nodes=4), [2.0, 2.5], None)  # writes only, one repetition
    res = collect(study)
    summary = pd.read_csv(study / "tables" / "summary.csv")
    assert set(summary["phase"]) == {"write"} and (summary["n"] == 1).all()
    assert summary["bytes_over_time_GiBps_rep_stdev"].isna().all()
    assert summary["bytes_over_time_GiBps_ci95"].isna().all()
    assert (summary["scaling_efficiency"] == 1.0).all()
    names = {p.path.name for p in res.plots}
    assert {"bandwidth_gpt2-125m.png", "duration_gpt2-125m.png", "rank_spread.png"} <= names
    assert any("single node count" in s for s in res.skipped_plots)
    assert any("one io_mode" in s for s in res.skipped_plots)
    for plot in res.plots:
        assert_png_has_content(plot.path)
    html = res.report_html.read_text()
    assert "single node count" in html


def test_empty_study_does_not_crash(tmp_path: Path) -> None:
    study = tmp_path / "results" / "empty"
    study.mkdir(parents=True)
    res = collect(study, [PointStatus("abc", "PENDING", 1)])
    assert res.points == 0 and res.plots == [] and res.report_html.exists()
    assert "nothing to plot" in res.report_html.read_text().lower()


def test_recollect_is_incremental_generated(tmp_path: Path) -> None:
    study = tmp_path / "results" / "incr"
    scaling_study(study, reps=2, nodes=(1, 2), io_modes=("buffered",), zeros=(1,))
    first = collect(study)
    assert not first.unchanged and first.files_read == 4 and first.files_cached == 0
    again = collect(study)
    assert again.unchanged and again.points == 4 and again.plots == first.plots
    statuses = [PointStatus("x", "FAILED", 1, failure_reason="boom")]
    assert not collect(study, statuses).unchanged  # new ledger facts: new report, files from cache
    write_result(study, make_point(nodes=4), [9.0], [9.0])
    third = collect(study, statuses)
    assert not third.unchanged and third.files_read == 1 and third.files_cached == 4 and third.points == 5
    (study / "report.html").unlink()
    assert not collect(study, statuses).unchanged  # an output went missing: rebuilt


def test_plots_cover_filesystems_io_modes_and_look_non_blank(tmp_path: Path) -> None:
    study = tmp_path / "results" / "wide"
    scaling_study(study, reps=3, nodes=(1, 2, 4, 8), filesystems=("lustre", "nvme"),
                  models=("gpt2-125m", "llama_7b"))
    res = collect(study)
    names = {p.path.name for p in res.plots}
    assert {"bandwidth_gpt2-125m.png", "bandwidth_llama_7b.png", "duration_llama_7b.png",
            "efficiency_llama_7b.png", "rank_spread.png", "io_mode.png"} <= names
    assert not res.skipped_plots
    for plot in res.plots:
        assert_png_has_content(plot.path)


def test_import_dlio_per_rank_files(tmp_path: Path) -> None:
    run = tmp_path / "dlio_new"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({
        "num_accelerators": 4, "num_hosts": 2, "metric": {"checkpoint_size_GB": 10.0}}))
    # rank 1 starts 1 s late and ends 1 s later: span 5 s, slowest rank 4 s
    for rank, (start, end) in enumerate([("00", "04"), ("01", "05")]):
        (run / f"{rank}_per_epoch_stats.json").write_text(json.dumps({"1": {
            "save_ckpt1": {"start": f"2026-11-22T10:00:{start}", "end": f"2026-11-22T10:00:{end}",
                           "duration": 4.0, "throughput": 2.5},
            "load_ckpt1": {"start": f"2026-11-22T10:01:{start}", "end": f"2026-11-22T10:01:{end}",
                           "duration": 4.0, "throughput": 2.5}}}))
    frame = import_dlio(run)
    assert list(frame["phase"]) == ["write", "read"]
    write = frame[frame["phase"] == "write"].iloc[0]
    assert write["span_s"] == pytest.approx(5.0) and write["aggregate_GiBps"] == pytest.approx(2.0)
    assert write["duration_s"] == 4.0 and write["nodes"] == 2 and write["ranks_per_node"] == 2
    study = tmp_path / "results" / "with-dlio"
    write_result(study, make_point(nodes=2), [3.0], [3.0])
    res = collect(study, import_dlio=run)
    summary = pd.read_csv(study / "tables" / "summary.csv")
    assert set(summary["tool"]) == {"studyctl", "dlio"}
    assert res.report_html.exists() and "dlio" in res.report_html.read_text()


def dlio_run(root: Path, name: str, phase_key: str, start: str, durations: tuple[float, ...],
             dlio_mean: float) -> Path:
    """A DLIO output folder with per-rank files (2 ranks) for one phase, as a write-only or read-only invocation."""
    run = root / name
    run.mkdir(parents=True)
    prefix = "save_" if phase_key == "save_ckpt" else "load_"
    (run / "summary.json").write_text(json.dumps({
        "num_accelerators": 2, "num_hosts": 1, "workload": "llama_7b", "start": start,
        "metric": {"checkpoint_size_GB": 8.0, f"{prefix}checkpoint_io_mean_GB_per_second": dlio_mean}}))
    for rank in range(2):
        records = {f"{phase_key}{i + 1}": {"start": f"2026-11-22T10:0{i}:00", "end": f"2026-11-22T10:0{i}:0{int(d)}",
                                           "duration": d - rank, "throughput": 8.0 / (d - rank)}
                   for i, d in enumerate(durations)}
        (run / f"{rank}_per_epoch_stats.json").write_text(json.dumps({"1": records}))
    return run


def test_import_several_dlio_runs_all_kept_and_labelled(tmp_path: Path) -> None:
    write = dlio_run(tmp_path / "dlio", "write-run", "save_ckpt", "2026-11-22T10:00:00", (4.0, 8.0), 1.6)
    read = dlio_run(tmp_path / "dlio", "read-run", "load_ckpt", "2026-11-22T11:00:00", (2.0, 2.0), 4.1)
    study = tmp_path / "results" / "mixed"
    write_result(study, make_point(), [3.0], [3.0])
    res = collect(study, import_dlio=[write, read])
    summary = pd.read_csv(study / "tables" / "summary.csv")
    dlio = summary[summary["tool"] == "dlio"].set_index("phase")
    assert set(dlio.index) == {"write", "read"}  # the write invocation and the read invocation, both kept
    assert dlio.loc["write", "bytes_over_time_GiBps"] == pytest.approx(16.0 / 12.0)  # 2 × 8 GiB in 4 + 8 s
    assert dlio.loc["read", "bytes_over_time_GiBps"] == pytest.approx(4.0)
    assert all("DLIO, warm reads, no fsync" in f for f in dlio["flags"])
    html = res.report_html.read_text()
    for text in ("write-run", "read-run", "2026-11-22T11:00:00", "1.600", "4.100", "1.333",
                 "DLIO, warm reads, no fsync"):
        assert text in html, text
    with pytest.raises(UserError, match="given twice"):
        collect(study, import_dlio=[write, write], force=True)
