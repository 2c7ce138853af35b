"""A default study (ceilings and calibration on) narrowed with `exclude:`, widened on an axis or given more
repetitions stays the same study: real local runs, every completed result kept, nothing rerun, the points
studyctl adds made anew only where the measure points changed what they derive from, and `collect` using a
superseded added point's result for the shape it measured while that shape is measured, never otherwise."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from studyctl import api
from studyctl.attempt.paths import StudyPaths
from studyctl.states import State
from studyctl.study.ledger import Ledger, PointRow
from tests.cli import run_cli

SWEEP = """\
study: grow
models: [{models}]
matrix: {{nodes: {nodes}, ranks_per_node: 1}}
repetitions: {repetitions}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: 0.002, writes: 1, reads: 1, buffer_mib: 8, block_mib: 4}}
{extra}"""
DEEP = "{name: deep, base: gpt2-125m, num_layers: 24}"  # twice gpt2-125m's layers: the larger checkpoint


def write(tmp_path: Path, name: str, models: str = "gpt2-125m", nodes: str = "[1]", repetitions: int = 1,
          extra: str = "") -> Path:
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(SWEEP.format(models=models, nodes=nodes, repetitions=repetitions, fs=fs, extra=extra))
    return path


def submit(sweep: Path, results: Path) -> str:
    run = run_cli("sweep", "submit", str(sweep), "--results", str(results))
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout + run.stderr


def ledger_points(results: Path) -> dict[str, PointRow]:
    with Ledger(StudyPaths(results / "grow").ledger, readonly=True) as ledger:
        return {p.point_id: p for p in ledger.points(only_in_sweep=False)}


def role(p: PointRow) -> str:
    return p.config.get("role", "measure")


def added(points: dict[str, PointRow]) -> dict[str, PointRow]:
    return {pid: p for pid, p in points.items() if role(p) != "measure"}


def assert_not_rerun(before: dict[str, PointRow], after: dict[str, PointRow]) -> None:
    """Every point completed before is still there, completed, on its one attempt."""
    for pid, p in before.items():
        assert p.state is State.COMPLETED and p.attempts == 1
        assert after[pid].state is State.COMPLETED and after[pid].attempts == 1, (pid, role(p))


def collected(results: Path) -> tuple[api.CollectResult, pd.DataFrame, pd.DataFrame]:
    result = api.collect("grow", results)
    tables = result.tables_dir
    ceilings = pd.read_parquet(tables / "ceilings.parquet")
    checkpoints = pd.read_parquet(tables / "checkpoints.parquet")
    return result, ceilings, checkpoints


def test_widened_by_nodes_then_narrowed_by_exclude(tmp_path: Path) -> None:
    results = tmp_path / "results"
    submit(write(tmp_path, "one"), results)
    first = ledger_points(results)
    assert {role(p) for p in first.values()} == {"measure", "ceiling", "calibration"}

    submit(write(tmp_path, "two", nodes="[1, 2]"), results)
    widened = ledger_points(results)
    assert_not_rerun(first, widened)
    assert all(widened[pid].in_sweep for pid in first)  # one node's ceiling and calibration are reused as they are
    new = {pid: p for pid, p in widened.items() if pid not in first}
    assert {(role(p), p.point.nodes) for p in new.values()} >= {("measure", 2), ("ceiling", 2), ("calibration", 2)}
    assert all(p.state is State.COMPLETED and p.point.nodes == 2 for p in new.values())

    out = submit(write(tmp_path, "narrow", nodes="[1, 2]", extra="exclude: [{nodes: 2, reason: one node only}]\n"),
                 results)
    assert "0 new" in out and "running 0" in out  # nothing ran again
    narrowed = ledger_points(results)
    assert_not_rerun(widened, narrowed)
    two_nodes_added = {pid for pid, p in added(narrowed).items() if p.point.nodes == 2}
    assert two_nodes_added and not any(narrowed[pid].in_sweep for pid in two_nodes_added)

    result, ceilings, checkpoints = collected(results)
    assert set(ceilings["nodes"]) == {1}  # the two-node shape is no longer measured: its ceiling is not judged
    assert two_nodes_added <= set(result.left_out)
    calibration = checkpoints[checkpoints["role"] == "calibration"]
    assert set(calibration["nodes"]) == {1} and len(calibration)
    assert result.hardware and result.points == 1

    out = submit(write(tmp_path, "two", nodes="[1, 2]"), results)  # widened again: the same points, reused
    assert "0 new" in out and "running 0" in out
    assert all(p.in_sweep for p in ledger_points(results).values())


def test_widened_by_a_larger_model(tmp_path: Path) -> None:
    results = tmp_path / "results"
    submit(write(tmp_path, "one"), results)
    first = ledger_points(results)
    old_added = set(added(first))

    submit(write(tmp_path, "two", models=f"gpt2-125m, {DEEP}"), results)
    after = ledger_points(results)
    assert_not_rerun(first, after)
    # the larger model is now the source of the shape's ceiling and calibration: those are new, the old ones
    # superseded (out of the sweep, not rerun) ...
    assert not any(after[pid].in_sweep for pid in old_added)
    new_added = {pid: p for pid, p in added(after).items() if p.in_sweep}
    assert {p.point.model.name for p in new_added.values()} == {"deep"}
    assert all(p.state is State.COMPLETED for p in new_added.values())

    # ... and their completed results still serve the shape they measured, which is still measured
    result, ceilings, checkpoints = collected(results)
    assert set(ceilings["point_id"]) == {pid for pid, p in added(after).items() if role(p) == "ceiling"}
    assert len(set(ceilings["shape"])) == 1 and result.hardware
    calibration = checkpoints[checkpoints["role"] == "calibration"]
    assert set(calibration["model"]) == {"gpt2-125m", "deep"}
    assert not result.left_out and result.points == 2

    # and submitting the widened sweep again runs nothing
    out = submit(write(tmp_path, "two", models=f"gpt2-125m, {DEEP}"), results)
    assert "running 0" in out


def test_more_repetitions(tmp_path: Path) -> None:
    results = tmp_path / "results"
    submit(write(tmp_path, "one"), results)
    first = ledger_points(results)

    submit(write(tmp_path, "two", repetitions=2), results)
    after = ledger_points(results)
    assert_not_rerun(first, after)
    assert all(after[pid].in_sweep for pid in first)  # every added point kept: the second repetition adds to it
    new = {pid: p for pid, p in after.items() if pid not in first}
    assert {(role(p), p.point.repetition) for p in new.values()} == {("measure", 1), ("calibration", 1)}
    assert all(p.state is State.COMPLETED for p in new.values())
