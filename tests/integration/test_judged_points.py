"""One rule decides which points count: a point the study's sweep copy now excludes is judged nowhere:
not in collect's tables, not in compare, not in the MLPerf view, even with its old result still on disk."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from studyctl.analysis.collect import collect
from studyctl.analysis.compare import compare
from studyctl.analysis.report.mlperf import load_results, mlperf_for_study
from studyctl.attempt.judged import excluded_points
from studyctl.attempt.paths import StudyPaths
from studyctl.errors import UserError
from tests.resultgen import make_point, write_result

SWEEP = """\
study: {name}
ceilings: off
calibration: off
models: [gpt2-125m]
matrix:
  zero_stage: 1
  nodes: [1, 2]
  ranks_per_node: 2
  io_mode: buffered
filesystems:
  scratch: {{path: /tmp}}
repetitions: 2
checkpoint: {{scale: 0.01, writes: 2, reads: 2, buffer_mib: 4, block_mib: 4}}
{exclude}"""


def made_study(root: Path, name: str, two_node_speed: float) -> Path:
    """1 and 2 nodes, 2 repetitions each, as `SWEEP` plans them (same point ids); 2 nodes at `two_node_speed`."""
    study = root / name
    for nodes in (1, 2):
        for rep in range(2):
            speed = 2.0 if nodes == 1 else two_node_speed
            write_result(study, make_point(nodes=nodes, rep=rep), [speed * (1 + 0.01 * rep)] * 2, [speed] * 2)
    write_sweep(study, "")
    return study


def write_sweep(study: Path, exclude: str) -> None:
    copy = StudyPaths(study).sweep_copy
    copy.write_text(SWEEP.format(name=study.name, exclude=exclude))
    later = time.time_ns() + 1_000_000  # a new mtime even on a coarse clock: collect's fingerprint sees the edit
    os.utime(copy, ns=(later, later))


def two_node_ids() -> set[str]:
    return {make_point(nodes=2, rep=rep).point_id for rep in range(2)}


def test_compare_and_mlperf_ignore_points_the_sweep_copy_now_excludes(tmp_path: Path) -> None:
    a = made_study(tmp_path, "a", two_node_speed=4.0)
    b = made_study(tmp_path, "b", two_node_speed=1.0)  # 2 nodes regressed 4×
    before = compare(a, b, 0.05)
    assert before.any_regressed and set(before.regressed["nodes"]) == {2}
    assert {r.point.nodes for r in load_results(b)} == {1, 2}

    write_sweep(b, "exclude:\n  - {nodes: 2}\n")  # the sweep now rules 2 nodes out
    assert excluded_points(StudyPaths(b)) == two_node_ids()
    after = compare(a, b, 0.05)
    assert not after.any_regressed and set(after.matched["nodes"]) == {1}
    assert after.unmatched_b == 0 and after.unmatched_a == 2  # a's 2-node cells (write, read) have no partner
    assert {r.point.nodes for r in load_results(b)} == {1}
    verdicts, html, _ = mlperf_for_study(b, "b")
    judged = {p.point_id for v in verdicts for p in v.points}
    assert judged and not judged & two_node_ids() and html.exists()
    res = collect(b)
    assert sorted(res.left_out) == sorted(two_node_ids())
    assert set(pd.read_csv(b / "tables" / "summary.csv")["nodes"]) == {1}

    write_sweep(a, "exclude:\n  - {nodes: 2}\n")  # excluded in both: nothing left unmatched
    both = compare(a, b, 0.05)
    assert both.unmatched_a == both.unmatched_b == 0 and len(both.matched) == 2


def test_everything_excluded_is_nothing_to_compare(tmp_path: Path) -> None:
    a = made_study(tmp_path, "a", two_node_speed=4.0)
    b = made_study(tmp_path, "b", two_node_speed=4.0)
    write_sweep(b, "exclude:\n  - {zero_stage: 1}\n")
    with pytest.raises(UserError, match="study b has no completed results to compare"):
        compare(a, b, 0.05)
    assert load_results(b) == []


def test_a_missing_or_damaged_sweep_copy_excludes_nothing(tmp_path: Path) -> None:
    b = made_study(tmp_path, "b", two_node_speed=1.0)
    StudyPaths(b).sweep_copy.write_text("study: [unclosed\n")
    assert excluded_points(StudyPaths(b)) == frozenset()
    assert len(load_results(b)) == 4
    StudyPaths(b).sweep_copy.unlink()
    assert excluded_points(StudyPaths(b)) == frozenset() and len(load_results(b)) == 4


def test_a_real_study_edited_to_exclude_points(tmp_path: Path, small_study: Path) -> None:
    """The real 16-point study; its sweep copy edited as a resubmit with a new exclude rule leaves it."""
    study = tmp_path / "results" / small_study.name
    shutil.copytree(small_study, study)
    copy = StudyPaths(study).sweep_copy
    copy.write_text(copy.read_text() + "exclude:\n  - {nodes: 2, io_mode: direct}\n")
    excluded = excluded_points(StudyPaths(study))
    assert len(excluded) == 4  # 2 ZeRO stages × 2 repetitions
    assert not excluded & {r.point_id for r in load_results(study)} and len(load_results(study)) == 12
    res = compare(small_study, study, 0.05)
    assert len(res.matched) == (8 - 2) * 2 and res.unmatched_a == 2 * 2 and res.unmatched_b == 0
    assert sorted(collect(study).left_out) == sorted(excluded)
