"""One run-time estimate: the plan's row, calibration's budget and the Slurm time limit count a point's run the same
way (`definition.planning.run_time`), each under its own assumptions; a restart's restore and a full restore's extra
reads
count in all of them, bytes received by broadcast in none."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from studyctl.backends.slurm.submit import LIMIT_OVERHEAD_S, point_time_limit_min
from studyctl.definition.checkpoint.restore_reads import storage_read_bytes
from studyctl.definition.planning.calibration import estimated_run_seconds
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import plan_row
from studyctl.definition.planning.run_time import point_moved_bytes, point_run_seconds
from studyctl.definition.planning.sweep import Estimate, load_sweep

SWEEP = """\
study: rt
models: [llama_7b]
matrix:
  zero_stage: [0, 3]
  nodes: 2
  ranks_per_node: 2
  tensor_parallel: 2
  restore: [rank, full, broadcast]
  recovery: [none, same]
filesystems: {scratch: {path: /tmp, kind: local}}
checkpoint: {scale: 0.005, writes: 2, reads: 3}
training: {simulated_step: {compute_s: 0.2}}
ceilings: on
calibration: off
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("rt") / "s.yaml"
    path.write_text(SWEEP)
    return load_sweep(path)


def test_the_plan_row_is_the_run_time_estimate(sweep) -> None:  # type: ignore[no-untyped-def]
    planned = [pp for pp in expand(sweep) if not pp.excluded]
    assert {pp.point.role for pp in planned} == {"measure", "ceiling"}
    assert {pp.point.recovery is not None for pp in planned} == {True, False}
    for pp in planned:
        row = plan_row(pp, sweep)
        assert row.sized.estimated_seconds == round(point_run_seconds(pp.point, sweep.estimate), 1), pp.point.point_id
        if pp.point.role == "measure":
            assert estimated_run_seconds(pp.point, sweep) == point_run_seconds(pp.point, sweep.estimate)


def test_what_a_point_moves_counts_its_restart_and_what_storage_serves(sweep) -> None:  # type: ignore[no-untyped-def]
    for pp in expand(sweep):
        p = pp.point
        if pp.excluded or p.role != "measure":
            continue
        opts = p.checkpoint
        restores = opts.reads + (p.recovery is not None)
        read = storage_read_bytes(p.model, p.parallelism, opts)
        assert point_moved_bytes(p) == p.layout().total_bytes * opts.writes + read * restores


def test_the_slurm_limit_is_the_same_estimate_under_its_assumptions(sweep) -> None:  # type: ignore[no-untyped-def]
    """The derived limit: the estimate at the Slurm section's rate and overhead, rounded up to its buckets."""
    opts = sweep.slurm
    pessimistic = Estimate(GiBps_per_node=opts.assumed_GiBps_per_node, overhead_s=LIMIT_OVERHEAD_S)
    for pp in expand(sweep):
        if pp.excluded:
            continue
        minutes = point_run_seconds(pp.point, pessimistic) / 60
        bucket = 5 if minutes < 60 else 30
        assert point_time_limit_min(opts, pp.point) == max(opts.min_time_limit_min,
                                                           math.ceil(minutes / bucket) * bucket)


def test_a_full_restore_takes_longer_than_a_rank_restore_and_a_restart_longer_still(sweep) -> None:  # type: ignore[no-untyped-def]
    """At a rate slow enough for the bytes to matter, the limit follows what the point reads."""
    slow = sweep.slurm.model_copy(update={"assumed_GiBps_per_node": 0.0001})
    by = {(pp.point.checkpoint.restore, pp.point.zero_stage, pp.point.recovery is not None): pp.point
          for pp in expand(sweep) if not pp.excluded and pp.point.role == "measure"}
    rank, full = by[("rank", 0, False)], by[("full", 0, False)]
    assert point_moved_bytes(full) > point_moved_bytes(rank)
    assert point_time_limit_min(slow, full) > point_time_limit_min(slow, rank)
    assert point_time_limit_min(slow, by[("rank", 0, True)]) > point_time_limit_min(slow, rank)


def test_no_estimate_for_an_impossible_layout_but_the_floor(tmp_path: Path) -> None:
    """A point whose layout is impossible gets the floor: the worker says why, quickly."""
    sweep = load_sweep(_write(tmp_path, SWEEP.replace("tensor_parallel: 2", "tensor_parallel: 3")))
    for pp in expand(sweep):
        if pp.point.problems():
            assert point_time_limit_min(sweep.slurm, pp.point) == sweep.slurm.min_time_limit_min
            return
    pytest.fail("no impossible point in the sweep")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path
