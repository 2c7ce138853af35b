"""The training table and its cells, from hand-made result files: the model's columns, the CIs over repetitions,
the flags, the restore a failure needs, and the bytes each projection scales with."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from studyctl.analysis.results import load_rows
from studyctl.analysis.stats import t_quantile_975
from studyctl.analysis.tables import Tables, build_tables
from studyctl.analysis.training.cells import cost_cells, display_axes, strategy_rankings, summary_flags
from studyctl.analysis.training.cost import training_table
from studyctl.attempt.paths import StudyPaths
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.inputs import training as tc
from tests.resultgen import make_point, strategy_info, write_result

TRAINING = "training: {step_s: 0.5, interval_steps: 120, node_mtbf_h: 1000, nodes: 16}\n"
INTERVAL, MTBF = 120 * 0.5, 1000 * 3600 / 16
SPREAD = (0.9, 1.0, 1.1)  # per repetition: a known sample, so a known CI


def _study(tmp_path: Path, training: str = TRAINING) -> Path:
    study = tmp_path / "costs"
    study.mkdir()
    (study / "sweep.yaml").write_text(f"study: costs\n{training}")
    return study


def _write(study: Path, p: Point, blocking: float, background: float = 0.0, interference: float = 0.0,
           restore: dict[str, Any] | None = None, tier_fstype: str | None = None) -> None:
    info = strategy_info(p, blocking, background, interference, restore, tier_fstype)
    write_result(study, p, [2.0] * p.checkpoint.writes, [3.0] * p.checkpoint.reads, strategy=info)


def _reps(study: Path, blocking: float, background: float = 0.0, interference: float = 0.0, reps: int = 3,
          restore: dict[str, Any] | None = None, tier_fstype: str | None = None, **opts: Any) -> list[Point]:
    made = []
    for rep in range(reps):
        p = make_point(rep=rep, **opts)
        k = SPREAD[rep]
        _write(study, p, blocking * k, background * k, interference * k, restore, tier_fstype)
        made.append(p)
    return made


def _cells(tables: Tables) -> list[dict[str, Any]]:
    return cost_cells(tables.training, summary_flags(tables.summary)).to_dict("records")


def test_each_point_is_costed_with_dalys_complete_model(tmp_path: Path) -> None:
    study = _study(tmp_path)
    _reps(study, 0.01, strategy="sync")
    _reps(study, 0.001, 1.0, 0.002, strategy="async", step_s=0.5)  # a persist longer than the interval, projected
    t = build_tables(study).training
    assert len(t) == 6
    for r in t.to_dict("records"):
        factor = r["nominal_checkpoint_bytes"] / r["checkpoint_bytes"]
        assert r["projection_factor"] == pytest.approx(factor)
        assert r["blocking_s"] == pytest.approx(r["blocking_measured_s"] * factor)
        lag = r["background_s"]  # the real background time: not capped at the interval
        assert (lag > INTERVAL) == (r["strategy"] == "async")
        cost = r["blocking_s"] + r["interference_s"] + max(lag - INTERVAL, 0.0)
        assert r["checkpoint_cost_s"] == pytest.approx(cost)
        assert r["durable_lag_s"] == pytest.approx(lag)
        assert r["restart_s"] == pytest.approx(r["restore_s"])  # no launch measured, none given: 0 s relaunch
        assert r["job_mtbf_s"] == pytest.approx(MTBF)
        waste = tc.total_waste_share(INTERVAL, cost, MTBF, r["restart_s"], lag)
        assert r["total_waste"] == pytest.approx(waste) and r["goodput"] == pytest.approx(1 - waste)
        assert r["checkpoint_share"] == pytest.approx(cost / (INTERVAL + cost))
        assert r["young_interval_s"] == pytest.approx(math.sqrt(2 * cost * MTBF))
        daly = tc.daly_interval_s(cost, MTBF)
        assert r["daly_interval_s"] == pytest.approx(daly)
        at_daly = r["blocking_s"] + r["interference_s"] + max(lag - daly, 0.0)
        assert r["total_waste_at_daly"] == pytest.approx(tc.total_waste_share(daly, at_daly, MTBF, r["restart_s"], lag))
        assert r["lost_work_per_failure_s"] == pytest.approx((INTERVAL + cost) / 2 + lag)


def test_cells_carry_a_95_percent_ci_over_repetitions_through_projection(tmp_path: Path) -> None:
    study = _study(tmp_path)
    points = _reps(study, 0.01, strategy="sync")
    tables = build_tables(study)
    (cell,) = _cells(tables)
    factor = tables.training["projection_factor"].iloc[0]
    values = [0.01 * k * factor for k in SPREAD]
    mean = sum(values) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
    assert cell["n"] == len(points)
    assert cell["blocking_s"] == pytest.approx(mean)
    assert cell["blocking_s_ci95"] == pytest.approx(t_quantile_975(2) * sd / math.sqrt(3))
    wastes = tables.training["total_waste"]
    assert cell["total_waste_ci95"] == pytest.approx(t_quantile_975(2) * wastes.std(ddof=1) / math.sqrt(3))
    assert "simulated nodes (one host)" in cell["flags"] and "relaunch not measured: 0 s assumed" in cell["flags"]
    assert "one repetition" not in cell["flags"]


def test_one_repetition_has_no_ci_and_says_so(tmp_path: Path) -> None:
    study = _study(tmp_path)
    _reps(study, 0.01, reps=1, strategy="sync")
    (cell,) = _cells(build_tables(study))
    assert math.isnan(cell["blocking_s_ci95"]) and "one repetition" in cell["flags"]


def test_interference_whose_ci_contains_zero_is_no_measurable_interference(tmp_path: Path) -> None:
    study = _study(tmp_path)
    for rep, itf in enumerate((0.0, 0.002, 0.0)):  # mean 0.00067, CI half-width ≈ 0.0029: contains 0
        _write(study, make_point(rep=rep, strategy="async", step_s=0.5), 0.001, 0.01, itf)
    for rep, itf in enumerate((0.010, 0.011, 0.012)):
        _write(study, make_point(rep=rep, nodes=2, strategy="async", step_s=0.5), 0.001, 0.01, itf)
    by_nodes = {c["nodes"]: c for c in _cells(build_tables(study))}
    assert "no measurable interference" in by_nodes[1]["flags"]
    assert "no measurable interference" not in by_nodes[2]["flags"]


def test_a_tiered_cost_uses_a_failures_restore(tmp_path: Path) -> None:
    study = _study(tmp_path)
    intact = {"read_s": 0.001}
    _reps(study, 0.001, 0.01, strategy="tiered", step_s=0.5, tier="tier", replaced_nodes=0, restore=intact,
          tier_fstype="tmpfs")
    _reps(study, 0.001, 0.01, nodes=2, strategy="tiered", step_s=0.5, tier="tier", replaced_nodes=0, restore=intact)
    _reps(study, 0.001, 0.01, nodes=2, strategy="tiered", step_s=0.5, tier="tier", replaced_nodes=1,
          restore={"read_s": 0.002})
    tables = build_tables(study)
    t = tables.training
    failed = t[(t["nodes"] == 2) & (t["replaced_nodes"] == 1)]["restore_s"].mean()
    cells = {(c["nodes"], c["replaced_nodes"]): c for c in _cells(tables)}
    alone, with_sibling, failure = cells[(1, 0)], cells[(2, 0)], cells[(2, 1)]
    assert "no-failure restore (replaced_nodes 0: every tier intact)" in alone["flags"]
    assert "memory tier (tmpfs)" in alone["flags"] and "memory tier" not in failure["flags"]
    assert with_sibling["failure_restore_s"] == pytest.approx(failed), "the replaced_nodes 1 cell's restore"
    assert "no-failure restore" not in with_sibling["flags"]
    assert "restore after a failure from the cell with replaced_nodes 1" in with_sibling["flags"]
    assert "no-failure restore" not in failure["flags"]


def test_restore_projections_use_the_restores_own_bytes_and_the_summary_agrees(tmp_path: Path) -> None:
    study = _study(tmp_path)
    p = make_point(zero=1, nodes=2, rpn=2, strategy="sync", restore="broadcast")
    full = make_point(zero=1, nodes=2, rpn=2, strategy="sync", restore="rank")
    read = p.checkpoint.model_copy(update={"restore": "rank"})
    from studyctl.definition.checkpoint.points import restore_bytes

    total, from_files = (restore_bytes(p.model, p.parallelism, p.checkpoint),
                         restore_bytes(p.model, p.parallelism, read))
    _write(study, p, 0.01, restore={"shared_bytes": from_files, "broadcast_bytes": total - from_files,
                                    "read_s": 0.002, "broadcast_s": 0.001})
    _write(study, full, 0.01, restore={"read_s": 0.002})
    tables = build_tables(study)
    row = tables.training.set_index("restore").loc["broadcast"]
    nominal_total = restore_bytes(p.model, p.parallelism, p.checkpoint.model_copy(update={"scale": 1.0}))
    assert row["nominal_restore_bytes"] == nominal_total
    assert row["restore_s"] == pytest.approx(row["restore_measured_s"] * nominal_total / total)
    assert row["read_s"] == pytest.approx(0.002 * row["nominal_restore_file_bytes"] / from_files)
    assert row["broadcast_s"] == pytest.approx(0.001 * row["nominal_broadcast_bytes"] / (total - from_files))
    assert row["restore_file_GiBps"] == pytest.approx(from_files / (1 << 30) / 0.002), "broadcast bytes left out"
    summary = tables.summary[tables.summary["phase"] == "read"].set_index("restore")
    for mode in ("broadcast", "rank"):
        projected = tables.training.set_index("restore").loc[mode, "restore_s"]
        assert summary.loc[mode, "projected_full_size_s"] == pytest.approx(projected)


def test_rankings_only_where_the_cis_separate(tmp_path: Path) -> None:
    study = _study(tmp_path)
    _reps(study, 0.02, strategy="sync")
    _reps(study, 0.001, 0.01, strategy="async", step_s=0.5)
    _reps(study, 0.001, 0.01, nodes=2, strategy="async", step_s=0.5)
    for rep, blocking in enumerate((0.0005, 0.02, 0.0015)):  # a wide CI that overlaps async's
        _write(study, make_point(rep=rep, nodes=2, strategy="sync"), blocking)
    cells = cost_cells(build_tables(study).training)
    lines = strategy_rankings(cells, display_axes(cells))
    one, two = (next(line for line in lines if line.startswith(f"nodes {n}:")) for n in (1, 2))
    assert one.index("async") < one.index("sync") and " < " in one and "not separable" not in one
    assert "≈ (not separable at 95%)" in two


def test_given_restart_and_contention_from_newer_results(tmp_path: Path) -> None:
    study = _study(tmp_path, TRAINING.replace("nodes: 16}", "nodes: 16, restart_s: 30}"))
    _reps(study, 0.001, 0.01, strategy="async", step_s=0.5)
    rows = [r["training"] for r in load_rows(StudyPaths(study)).rows]
    for r in rows:  # what a newer worker records about its host
        r.update(host_cores=2, ranks_on_host=2, background_threads_on_host=2, launch_s=4.0)
    from studyctl.analysis.training.cost import load_training

    t = training_table(rows, load_training(StudyPaths(study).sweep_copy))
    assert (t["relaunch_s"] == 30.0).all() and (t["restart_s"] == 30.0 + t["restore_s"]).all()
    (cell,) = cost_cells(t).to_dict("records")
    assert "contention: ranks + background threads > host cores" in cell["flags"]
    assert "relaunch not measured" not in cell["flags"]
    measured = training_table(rows, load_training(Path("/nonexistent")))
    assert (measured["relaunch_s"] == 4.0).all() and set(measured["relaunch_source"]) == {"measured launch"}


def test_an_engines_sync_and_async_saves_are_ranked_against_each_other(tmp_path: Path) -> None:
    """DCP's stager settings exist only for an async save: the ranking compares DCP sync with DCP async across
    them (naming them), per engine; the engine is an axis of the cost table like any setting."""
    study = _study(tmp_path)
    _reps(study, 0.02, strategy="sync", engine="dcp")
    _reps(study, 0.001, 0.01, strategy="async", step_s=0.5, engine="dcp", stager_shared=True, stager_async=True)
    _reps(study, 0.03, strategy="sync", engine="torch_save")
    training = build_tables(study).training
    cells = cost_cells(training)
    axes = display_axes(cells)
    assert "engine" in axes and "stager_shared" in axes
    (line,) = strategy_rankings(cells, axes)
    assert line.startswith("engine dcp: async (") and "stager_shared True" in line and " < sync " in line
    blocked = training.groupby(["engine", "strategy"])["blocking_measured_s"].mean().to_dict()
    assert blocked == pytest.approx({("dcp", "sync"): 0.02, ("dcp", "async"): 0.001, ("torch_save", "sync"): 0.03})
