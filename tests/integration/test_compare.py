"""compare: matched cells, ratios with CIs, and the exit code both ways."""

from __future__ import annotations

import json
from pathlib import Path

from studyctl.api import parse_threshold
from tests.cli import CliRun, run_cli

from .test_collect import copy_study


def slow_down(study: Path, factor: float) -> None:
    """Edit result files as if the storage were `factor` times as fast (times and bandwidths scaled)."""
    for path in study.glob("points/*/attempt-*/result.json"):
        data = json.loads(path.read_text())
        for record in [*data["checkpoints"], *(r for c in data["checkpoints"] for r in c["ranks"]),
                       *data["summary"].values()]:  # every time and rate, so the file stays consistent
            for key, value in record.items():
                if not isinstance(value, float):
                    continue
                if "GiBps" in key:
                    record[key] = value * factor
                elif key.endswith("_s") or "_s_" in key:
                    record[key] = value / factor
        path.write_text(json.dumps(data))


def run_compare(results: Path, a: str, b: str, *extra: str) -> CliRun:
    return run_cli("compare", a, b, "--results", str(results), *extra)


def test_compare_exit_codes(small_study: Path, tmp_path: Path) -> None:
    a = copy_study(small_study, tmp_path / "a")
    b = copy_study(small_study, tmp_path / "b")
    results = tmp_path / "cmp"
    (results).mkdir()
    (results / "base").symlink_to(a)
    (results / "same").symlink_to(b)
    same = run_compare(results, "base", "same")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "16 matched cells" in same.stdout and "0 cell(s) regressed" in same.stdout

    c = copy_study(small_study, tmp_path / "c")
    slow_down(c, 0.5)
    (results / "slower").symlink_to(c)
    slower = run_compare(results, "base", "slower", "--threshold", "10%")
    assert slower.returncode == 1
    assert "REGRESSED" in slower.stdout and "16 cell(s) regressed" in slower.stdout
    assert (c / "compare" / "base" / "ratio.png").stat().st_size > 10_000
    faster = run_compare(results, "slower", "base")
    assert faster.returncode == 0 and "faster" in faster.stdout


def test_threshold_parsing() -> None:
    assert parse_threshold("5%") == 0.05 and parse_threshold("0.1") == 0.1


def test_bad_threshold_is_one_line_error(small_study: Path, tmp_path: Path) -> None:
    proc = run_compare(small_study.parent, "small", "small", "--threshold", "lots")
    assert proc.returncode == 2 and "--threshold" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ generated studies (no MPI)
import math  # noqa: E402

import pytest  # noqa: E402

from studyctl.analysis.compare import compare  # noqa: E402
from studyctl.errors import UserError  # noqa: E402
from tests.resultgen import make_point, scaling_study, write_result  # noqa: E402

from .test_collect import assert_png_has_content  # noqa: E402


def two_rep_study(root: Path, name: str, fs: str, bws: tuple[float, ...],
                  nodes: tuple[int, ...] = (1, 2)) -> Path:
    study = root / name
    for n in nodes:
        for rep, bw in enumerate(bws):
            write_result(study, make_point(nodes=n, rep=rep, fs=fs), [bw * n, bw * n], [bw * n])
    return study


def test_compare_flags_regressions_both_ways(tmp_path: Path) -> None:
    a = tmp_path / "base"
    b = tmp_path / "slower"
    scaling_study(a, reps=3, nodes=(1, 2, 4), zeros=(1,))
    scaling_study(b, reps=3, nodes=(1, 2, 4), zeros=(1,))
    slow_down(b, 0.8)  # B: every checkpoint 20% slower
    same = compare(a, a, 0.05)
    assert not same.any_regressed and len(same.matched) == 12 and (same.matched["ratio"] == 1.0).all()
    worse = compare(a, b, 0.05)
    assert worse.any_regressed and len(worse.regressed) == 12
    assert worse.matched["ratio"].to_numpy() == pytest.approx([0.8] * 12)
    assert worse.matched["significant"].all()
    overlay = b / "compare" / "base" / "ratio.png"
    assert overlay in worse.outputs
    assert_png_has_content(overlay)
    assert "REGRESSED" in (b / "compare" / "base" / "comparison.txt").read_text()
    assert not compare(a, b, 0.25).any_regressed  # a 20% drop is within a 25% threshold
    better = compare(b, a, 0.05)
    assert not better.any_regressed and (better.matched["ratio"] > 1.2).all()


def test_ratio_ci_hand_computed_and_filesystem_left_out(tmp_path: Path) -> None:
    a = two_rep_study(tmp_path, "lustre", "lustre", (1.0, 3.0))  # 1 node: repetitions at 1 and 3 GiB/s
    b = two_rep_study(tmp_path, "weka", "weka", (2.0, 2.0))  # 2 GiB/s, no spread
    res = compare(a, b, 0.05)
    assert res.differing == {"filesystem": ("lustre", "weka")} and "filesystem" not in res.match_keys
    assert res.label == "filesystem lustre → weka"
    row = res.matched[(res.matched["nodes"] == 1) & (res.matched["phase"] == "write")].iloc[0]
    # A: 0.5 GiB per repetition in 0.5 s and 1/6 s → total bytes / total time = 1 / (2/3) = 1.5 GiB/s
    times = (0.5, 0.5 / 3)
    r_a = 1.0 / sum(times)
    se_a = math.sqrt(sum((0.5 - r_a * t) ** 2 for t in times) / 2) / (sum(times) / 2)
    ratio = 2.0 / r_a
    assert row["ratio"] == pytest.approx(ratio)
    factor = math.exp(12.706 * (se_a / r_a))  # t(df = 1); se_b = 0; the interval is on the log scale
    assert row["ratio_ci95_low"] == pytest.approx(ratio / factor, rel=1e-3)
    assert row["ratio_ci95_high"] == pytest.approx(ratio * factor, rel=1e-3)
    assert not res.any_regressed


def test_filesystem_kept_when_studies_share_several(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    scaling_study(a, reps=2, nodes=(1,), filesystems=("lustre", "nvme"), io_modes=("buffered",), zeros=(1,))
    scaling_study(b, reps=2, nodes=(1,), filesystems=("nvme",), io_modes=("buffered",), zeros=(1,))
    res = compare(a, b, 0.05)
    assert "filesystem" in res.match_keys
    assert len(res.matched) == 2 and res.unmatched_a == 2 and res.unmatched_b == 0  # lustre has no partner


def test_one_repetition_has_no_interval_and_empty_study_is_an_error(tmp_path: Path) -> None:
    a = two_rep_study(tmp_path, "one_a", "fs", (2.0,))
    b = two_rep_study(tmp_path, "one_b", "fs", (1.0,))
    res = compare(a, b, 0.05)
    # b is half as fast, but one repetition a side gives no CI: the ratio is shown, never judged a regression
    assert not res.any_regressed and res.matched["ratio_ci95_low"].isna().all()
    assert not res.matched["judged"].any() and (res.matched["ratio"] < 0.6).all()
    lines = "\n".join(res.summary_lines())
    assert "n/a: one repetition" in lines and "not enough repetitions to judge" in lines
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no completed results"):
        compare(a, tmp_path / "empty", 0.05)
