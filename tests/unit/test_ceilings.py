"""Ceiling points: one per resource shape, from its largest point; the sweep's `ceilings:` setting;
plan's lines; submit, status, resubmit and cancel treat them as points."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from studyctl import api
from studyctl.definition.planning.auxiliary import auxiliary_points, with_auxiliary
from studyctl.definition.planning.ceilings import (
    AUTO_MAX_SHAPES,
    CI_TARGET,
    COST_REPETITIONS,
    EVEN_SAME,
    MAX_ROUNDS,
    MEMCPY_MAX_BYTES,
    MIN_ROUNDS,
    PROBE_MAX_BYTES,
    PROBE_STREAM_S,
    RAMP_ROUNDS,
    STORAGE_BUDGET_S,
    another_round,
    planned_rounds,
    probe_bytes,
    round_limit,
    storage_plan,
)
from studyctl.definition.planning.expand import expand, iter_points
from studyctl.definition.planning.plan import plan_rows, summarize_plan
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.planning.sweep import load_sweep, parse_sweep
from studyctl.errors import UserError
from studyctl.states import State
from tests.cli import run_cli
from tests.unit.fakes import FakeBackend, registered, write_sweep

BASE: dict[str, Any] = {
    "study": "c", "models": ["llama_7b", "gpt2-125m"],
    "matrix": {"zero_stage": [0, 1, 3], "io_mode": ["buffered", "direct"], "nodes": [1, 2]},
    "filesystems": {"a": {"path": "/tmp/a"}}, "repetitions": 2, "checkpoint": {"scale": 0.01},
    "exclude": [{"model": "llama_7b", "zero_stage": 0, "nodes": 2}],
}


def _sweep(**changes: Any) -> Any:
    return parse_sweep(json.loads(json.dumps({**BASE, **changes})), Path("c.yaml"))


def test_one_ceiling_per_shape_copied_from_its_largest_runnable_point() -> None:
    planned = expand(_sweep())
    measures = [pp for pp in planned if pp.point.role == "measure"]
    ceilings = [pp for pp in planned if pp.point.role == "ceiling"]
    shapes = {shape_of(pp.point) for pp in measures}
    assert len(ceilings) == len(shapes) == 4  # 2 I/O modes × 2 node counts
    assert [pp.order for pp in planned] == list(range(len(planned)))  # orders continue after the measure points
    assert len({pp.point.point_id for pp in planned}) == len(planned)
    for c in ceilings:
        runnable = [pp.point for pp in measures if not pp.excluded and shape_of(pp.point) == shape_of(c.point)]
        largest = max(p.layout().bytes_per_rank_max for p in runnable)
        source = c.point.model_copy(update={"role": "measure"})
        assert c.point.repetition == 0 and not c.excluded
        assert source.point_id in {p.point_id for p in runnable}  # a copy of one of the shape's own points
        assert probe_bytes(c.point)[0] == largest
    # the excluded point (llama ZeRO-0 on 2 nodes, the largest shard of all) is no ceiling's source
    two_nodes = [c.point for c in ceilings if c.point.nodes == 2]
    assert all(not (p.model.name == "llama_7b" and p.zero_stage == 0) for p in two_nodes)


@pytest.mark.parametrize("cold_read", ["none", "direct", "fadvise"])
def test_a_ceiling_reads_cold_the_way_its_shape_does_whatever_its_source(cold_read: str) -> None:
    """A buffered shape's probe is a buffered read of evicted files, a direct shape's an O_DIRECT read: never its
    source point's warm (none) or other method."""
    from studyctl.definition.checkpoint.points import cold_read_method

    for c in [pp.point for pp in expand(_sweep(checkpoint={"scale": 0.01, "cold_read": cold_read}))
              if pp.point.role == "ceiling"]:
        assert c.checkpoint.cold_read == "auto"
        assert cold_read_method(c.io_mode, c.checkpoint.cold_read) == \
            ("fadvise" if c.io_mode == "buffered" else "direct")


@pytest.mark.parametrize(("mode", "shapes", "expected"), [
    ("off", 4, 0), ("auto", 4, 4), ("on", 4, 4), ("shared", 4, 4),
    ("auto", AUTO_MAX_SHAPES + 1, 0), ("on", AUTO_MAX_SHAPES + 1, AUTO_MAX_SHAPES + 1)])
def test_the_ceilings_setting(mode: str, shapes: int, expected: int) -> None:
    sweep = _sweep(ceilings=mode, matrix={"nodes": list(range(1, shapes + 1))})
    planned = expand(sweep)
    assert sum(pp.point.role == "ceiling" for pp in planned) == expected
    streamed = list(with_auxiliary(sweep, iter_points(sweep)))  # plan's streamed rows hold the same points
    assert [pp.point.point_id for pp in streamed] == [pp.point.point_id for pp in planned]
    measure = [pp for pp in planned if pp.point.role == "measure"]
    assert [pp for pp in auxiliary_points(sweep, measure) if pp.point.role == "ceiling"] == \
        [pp for pp in planned if pp.point.role == "ceiling"]


def test_a_bad_setting_is_one_line_naming_file_key_and_values(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("study: s\nmodels: [gpt2-125m]\nfilesystems: {a: {path: /tmp}}\nceilings: sometimes\n")
    with pytest.raises(UserError) as bad:
        load_sweep(path)
    assert str(bad.value) == f"{path}:4: ceilings: 'sometimes' is not one of 'auto', 'on', 'off', 'shared'"
    assert bad.value.exit_code == 2
    for word, mode in (("off", "off"), ("on", "on"), ("shared", "shared")):  # YAML's bare on/off are booleans
        path.write_text(f"study: s\nmodels: [gpt2-125m]\nfilesystems: {{a: {{path: /tmp}}}}\nceilings: {word}\n")
        assert load_sweep(path).ceilings == mode


def test_plan_counts_ceiling_points_on_their_own_lines(tmp_path: Path) -> None:
    sweep = _sweep()
    rows = list(plan_rows(expand(sweep), sweep))
    summary = summarize_plan(rows)
    ceilings = [r for r in rows if r.role == "ceiling"]
    aux = summary.auxiliary["ceiling"]
    assert aux["points"] == len(ceilings) == 4 and summary.runnable == len(rows) - 2 * 2  # the rule's 2 per rep
    for r in ceilings:  # what the probes move: every rank its largest shard and (where it differs) its even share,
        largest, even = r.sized.bytes_per_rank_max, r.sized.bytes_per_rank_min  # small shards: whole, in moments
        assert largest < PROBE_MAX_BYTES
        probed = largest + (even if even < largest * (1 - EVEN_SAME) else 0)
        assert r.sized.checkpoint_bytes == r.sized.read_bytes_per_restore == probed * r.world_size
        # rounds of moments, the ramp first: the rule's most (3 writes and 3 reads a repetition of the source)
        assert r.writes == r.reads == RAMP_ROUNDS + MAX_ROUNDS
    assert aux["bytes"] == sum(2 * r.sized.checkpoint_bytes * (RAMP_ROUNDS + MAX_ROUNDS) for r in ceilings)
    assert aux["node_hours"] == pytest.approx(sum(r.sized.node_hours for r in ceilings))
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(BASE))
    res = run_cli("plan", str(path), "--limit", "0")
    assert res.returncode == 0, res.stderr
    assert ("of which ceiling points: 4, moving " in res.stdout
            and res.stdout.count(" ceiling ") + res.stdout.count(" ceiling│") >= 1)
    extras = summary.extras()  # ceilings and calibration against the whole plan, as plan prints them
    hours = sum(r.sized.node_hours for r in rows if r.role != "measure" and not r.excluded)
    assert extras["node_hours"] == (pytest.approx(hours), pytest.approx(hours / summary.node_hours))
    assert extras["points"] == (len(ceilings) + summary.auxiliary.get("calibration", {}).get("points", 0),
                                pytest.approx(extras["points"][0] / summary.runnable))
    assert f"of the node-hours ({extras['node_hours'][1]:.1%})" in res.stdout.replace("\n", " ")


def test_submit_status_resubmit_and_cancel_treat_a_ceiling_as_a_point(tmp_path: Path) -> None:
    sweep, results = write_sweep(tmp_path, ceilings="on"), tmp_path / "results"
    with registered(FakeBackend()) as fake:
        assert api.submit(sweep, "fake", results).launched == 5  # four ZeRO stages, one shape: one ceiling
        ceiling = next(la for la in fake.launched if la.point.role == "ceiling")
        fake.states[ceiling.point_id] = State.FAILED
        assert api.status("s", results).counts == {"FAILED": 1, "PENDING": 4}
        rep = api.resubmit("s", results)
        assert rep.launched == 1 and fake.launched[-1].point_id == ceiling.point_id
        assert fake.launched[-1].attempt == 2
        assert api.cancel("s", results) == 5


def test_a_shared_record_names_shape_path_and_nodes_alone(tmp_path: Path) -> None:
    from studyctl.definition.planning.ceilings import shared_record

    (tmp_path / "fs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "fs")
    one = shared_record(tmp_path, "fs-buffered-n2x1-b4m", str(tmp_path / "fs"), ["n2", "n1", "n1"])
    assert one == shared_record(tmp_path, "fs-buffered-n2x1-b4m", str(tmp_path / "link"), ["n1", "n2"])
    assert one.parent == tmp_path / "ceilings" and one.name.startswith("fs-buffered-n2x1-b4m.")
    others = {shared_record(tmp_path, "fs-direct-n2x1-b4m", str(tmp_path / "fs"), ["n1", "n2"]),
              shared_record(tmp_path, "fs-buffered-n2x1-b4m", str(tmp_path), ["n1", "n2"]),
              shared_record(tmp_path, "fs-buffered-n2x1-b4m", str(tmp_path / "fs"), ["n1", "n3"])}
    assert one not in others and len(others) == 3


def test_plan_and_the_local_refusal_judge_a_ceilings_memory_by_one_figure() -> None:
    from studyctl.backends.machine import Machine, misfit

    sweep = _sweep()
    planned = expand(sweep)
    for pp, row in zip(planned, plan_rows(planned, sweep), strict=True):
        if pp.point.role != "ceiling":
            continue
        need = row.sized.worker_memory_per_point_bytes
        copies = 2 * min(row.sized.bytes_per_rank_max, MEMCPY_MAX_BYTES) * pp.point.world_size
        assert need > copies  # the memory copy's state and snapshot, and the buffers
        assert misfit(pp.point, Machine(1000, need), 1) is None
        assert "of memory here" in (misfit(pp.point, Machine(1000, need - 1), 1) or "")


def test_a_ceilings_time_limit_counts_what_its_probes_move() -> None:
    """At the backend's pessimistic rate: the probe rule's rounds, each a bounded stream, not the whole shard."""
    from studyctl.backends.slurm.submit import point_time_limit_min
    from studyctl.definition.inputs.options import SlurmOptions
    from studyctl.definition.planning.sweep import Estimate

    sweep = _sweep(checkpoint={"scale": 1.0, "writes": 1, "reads": 1})  # ZeRO-0: rank 0 holds the model states
    (ceiling,) = [pp.point for pp in expand(sweep) if pp.point.role == "ceiling" and pp.point.zero_stage == 0][:1]
    options = SlurmOptions(assumed_GiBps_per_node=0.05, min_time_limit_min=1)
    plan = storage_plan(ceiling, Estimate(GiBps_per_node=0.05))
    assert plan.rounds == MIN_ROUNDS and plan.written == PROBE_MAX_BYTES  # slow: a buffered write is counted whole
    minutes = 2 + plan.runs * plan.round_s / 60
    assert point_time_limit_min(options, ceiling) == 5 * -(-minutes // 5)
    assert point_time_limit_min(options, ceiling) < point_time_limit_min(options, ceiling.model_copy(
        update={"role": "measure"}))


def test_the_probe_rule_runs_rounds_until_the_ci_is_narrow_or_the_budget_spent() -> None:
    steady, noisy = [10.0, 10.1, 9.9], [10.0, 14.0, 7.0]
    assert another_round({"a": steady[:2]}, 2, 1.0, 0.5, 60.0)  # fewer than MIN_ROUNDS: always
    assert not another_round({"a": steady, "b": steady}, 3, 1.0, 0.5, 60.0)  # every rate narrow: done
    assert another_round({"a": steady, "b": noisy}, 3, 1.0, 0.5, 60.0)  # one is not: another
    assert not another_round({"a": noisy}, 3, 59.6, 0.5, 60.0)  # it would overrun the budget
    assert not another_round({"a": noisy * 7}, MAX_ROUNDS, 1.0, 0.01, 60.0)
    # ±CI_TARGET exactly, as a factor: on the logs, t(0.975, 2) = 4.303 over sqrt(3) times their spread
    d = math.log(1 + CI_TARGET) * 3 ** 0.5 / 4.303
    assert not another_round({"a": [10 * math.exp(k * d * 0.99) for k in (-1, 0, 1)]}, 3, 1.0, 0.5, 60.0)
    assert another_round({"a": [10 * math.exp(k * d * 1.01) for k in (-1, 0, 1)]}, 3, 1.0, 0.5, 60.0)
    # plan's estimate: the rule's most, rounds of the estimated length that never narrow
    assert planned_rounds(13.0, 60.0) == 4 and planned_rounds(40.0, 60.0) == MIN_ROUNDS
    assert planned_rounds(0.001, 60.0) == MAX_ROUNDS and planned_rounds(7.0, 60.0) == 8
    # a cell's cost caps the rounds; the ramp's time counts against the budget
    assert planned_rounds(0.001, 60.0, max_rounds=4) == 4 and planned_rounds(7.0, 60.0, ramp=1) == 7


@pytest.mark.parametrize(("zero", "writes", "reads"), [(3, 1, 1), (3, 2, 1), (3, 3, 3), (1, 1, 1), (0, 4, 0)])
def test_a_ceiling_records_at_most_what_its_cells_repetitions_move(zero: int, writes: int, reads: int) -> None:
    """Its recorded storage rounds move at most COST_REPETITIONS times its source point's checkpoints and restores
    (a round writes and reads every probe), never fewer than MIN_ROUNDS nor more than MAX_ROUNDS; plan runs the
    ramp round on top and counts it in the bytes and time."""
    sweep = _sweep(matrix={"zero_stage": zero, "nodes": 2}, models=["gpt2-125m"],
                   checkpoint={"scale": 0.01, "writes": writes, "reads": reads})
    rows = list(plan_rows(expand(sweep), sweep))
    (ceiling,) = [r for r in rows if r.role == "ceiling"]
    source = max((r for r in rows if r.role == "measure"), key=lambda r: r.sized.bytes_per_rank_max)
    moved = source.sized.checkpoint_bytes * writes + source.sized.storage_read_bytes_per_restore * reads
    per_round = ceiling.sized.checkpoint_bytes + ceiling.sized.read_bytes_per_restore  # every probe, written and read
    expected = min(MAX_ROUNDS, max(MIN_ROUNDS, COST_REPETITIONS * moved // per_round))
    (point,) = [pp.point for pp in expand(sweep) if pp.point.role == "ceiling"]
    assert round_limit(point) == expected and ceiling.writes == ceiling.reads == RAMP_ROUNDS + expected
    if (zero, writes, reads) == (3, 1, 1):  # an even layout, its shard probed whole: 3 repetitions, 3 rounds
        assert expected == MIN_ROUNDS
    if (zero, writes, reads) == (3, 3, 3):
        assert expected == min(MAX_ROUNDS, 9)


def test_a_full_scale_ceiling_costs_a_few_percent_of_its_study(tmp_path: Path) -> None:
    """The seeds' flagship layout (llama3-1t, 128 nodes × 8, TP 8 × PP 64) with the default estimate: each probe
    phase streams at most PROBE_MAX_BYTES per rank, rounds stop within STORAGE_BUDGET_S; moving every rank's
    whole shard three times cost 198 TiB and 40% of this study's node-hours."""
    sweep = parse_sweep({"study": "l", "models": ["llama3-1t"], "filesystems": {"a": {"path": "/tmp/a"}},
                         "matrix": {"nodes": [128], "ranks_per_node": 8, "tensor_parallel": 8,
                                    "pipeline_parallel": 64}}, Path("l.yaml"))
    rows = list(plan_rows(expand(sweep), sweep))
    summary = summarize_plan(rows)
    (ceiling,) = [r for r in rows if r.role == "ceiling"]
    assert ceiling.sized.bytes_per_rank_max > 10 * PROBE_MAX_BYTES  # its shard: far above what the probe moves
    rate = sweep.estimate.GiBps_per_node / 8  # GiB/s per rank
    read = min(1.0, rate * PROBE_STREAM_S)  # GiB per rank: a buffered write is counted whole, the read streams
    round_s = (1.0 + read) / rate
    rounds = RAMP_ROUNDS + planned_rounds(round_s, STORAGE_BUDGET_S, MAX_ROUNDS, RAMP_ROUNDS)
    assert ceiling.writes == rounds and ceiling.sized.checkpoint_bytes == PROBE_MAX_BYTES * 1024
    assert ceiling.sized.estimated_seconds == pytest.approx(sweep.estimate.overhead_s + rounds * round_s, abs=0.1)
    share = summary.auxiliary["ceiling"]["node_hours"] / summary.node_hours
    assert 0 < share < 0.05
    assert summary.auxiliary["ceiling"]["bytes"] < 0.05 * (summary.bytes_to_write + summary.bytes_to_read)


def test_the_even_probe_runs_only_where_the_layout_is_uneven() -> None:
    """ZeRO-3 spreads a checkpoint evenly: its even share is its largest shard, measured once; ZeRO-1's is not."""
    from studyctl.definition.planning.ceilings import probes_run

    for zero, probes in ((3, {"largest"}), (1, {"largest", "even"})):
        sweep = _sweep(matrix={"zero_stage": [zero], "ranks_per_node": [4]})
        ceiling = next(pp.point for pp in expand(sweep) if pp.point.role == "ceiling")
        assert set(probes_run(ceiling)) == probes
    # both shards above what a probe streams: the same measurement, once
    sweep = _sweep(matrix={"zero_stage": [1], "ranks_per_node": [4]}, checkpoint={"scale": 1.0})
    ceiling = next(pp.point for pp in expand(sweep) if pp.point.role == "ceiling")
    assert min(probe_bytes(ceiling)) > PROBE_MAX_BYTES and probes_run(ceiling) == {"largest": PROBE_MAX_BYTES}
