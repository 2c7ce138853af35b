"""What the CLI learns through its one door (studyctl.api): one budget refusal for plan and submit, the plan's
streamed totals, and ledger points read as point models (their attributes, not nested dicts)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from studyctl import api
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError
from tests.cli import REPO, run_cli
from tests.studygen import build_study

QUICKSTART = str(REPO / "sweeps" / "quickstart.yaml")


def test_plan_and_submit_refuse_a_budget_with_the_same_line(tmp_path: Path) -> None:
    plan = run_cli("plan", QUICKSTART, "--budget-node-hours", "0.001")
    submit = run_cli("sweep", "submit", QUICKSTART, "--results", str(tmp_path), "--budget-node-hours", "0.001")
    refusal = [line for line in plan.stderr.splitlines() if "--budget-node-hours" in line]
    assert plan.returncode == submit.returncode == 1
    assert len(refusal) == 1 and refusal[0] in submit.stderr.splitlines(), (plan.stderr, submit.stderr)
    assert not any(tmp_path.iterdir())  # nothing recorded
    for budget in ("1000", "0"):  # under it: no refusal; 0 for a study that costs something: refused
        proc = run_cli("plan", QUICKSTART, "--budget-node-hours", budget)
        assert (proc.returncode, "--budget-node-hours" in proc.stderr) == ((0, False) if budget == "1000" else
                                                                          (1, True)), proc.stderr


def test_a_plan_totals_the_rows_it_streamed() -> None:
    plan = api.plan(Path(QUICKSTART))
    rows = list(plan.rows())
    planned = expand(load_sweep(Path(QUICKSTART)))
    assert [r.point_id for r in rows] == [pp.point.point_id for pp in planned]
    assert plan.summary.points == len(rows) and plan.summary.excluded == sum(pp.excluded for pp in planned)
    assert plan.summary.node_hours == sum(r.sized.node_hours for r in rows if not r.excluded)
    assert len(list(plan.rows())) == plan.summary.points == len(rows)  # streamed again: counted once



def test_a_plan_judges_the_points_it_streamed_as_a_second_pass_would(tmp_path: Path) -> None:
    """plan judges placement, disk, time and memory in the rows' own pass: the same lines as judging again."""
    sweep = tmp_path / "judged.yaml"
    sweep.write_text(Path(QUICKSTART).read_text().replace("study: quickstart", "study: judged")
                     .replace("timeout_s: 300", "timeout_s: 1"))
    for backend in ("local", "slurm"):
        plan = api.plan(sweep, backend)
        unread = plan.capacity()  # rows not read yet: judged by a pass of its own
        list(plan.rows())
        streamed = plan.capacity()
        assert streamed == api.plan_capacity(plan.sweep, plan.summary, backend)
        if backend == "local":  # local.timeout_s is 1 s: over every point's estimate, however judged
            assert any("local.timeout_s" in line for line in streamed[0]), streamed
            assert any("local.timeout_s" in line for line in unread[0]), unread
    with pytest.raises(UserError, match="nope"):
        api.plan(sweep, "nope")

def test_status_reads_each_point_as_its_model(tmp_path: Path) -> None:
    study = build_study(tmp_path, 40, "door")
    proc = run_cli("sweep", "status", str(study.root), "--json")
    assert proc.returncode == 0, proc.stderr
    shown = {p["point_id"]: p for p in json.loads(proc.stdout)["points"]}
    points = {pp.point.point_id: pp.point for pp in expand(load_sweep(study.sweep_copy))}
    assert shown.keys() == points.keys()
    for pid, p in points.items():
        assert (shown[pid]["model"], shown[pid]["nodes"], shown[pid]["io_mode"], shown[pid]["zero_stage"],
                shown[pid]["repetition"]) == (p.model.name, p.nodes, p.io_mode, p.zero_stage, p.repetition)
    rows = api.status(study.root).points
    assert all(r.point.point_id == r.point_id for r in rows)  # the stored configuration hashes to its id


def test_a_hand_edited_ledger_configuration_is_repaired_not_a_traceback(tmp_path: Path) -> None:
    """A stored configuration that is no longer a point: the ledger counts as damaged, is kept aside and rebuilt
    (the README's repair), so status shows states, never a traceback."""
    study = build_study(tmp_path, 40, "edited")
    with sqlite3.connect(study.ledger) as db:
        (pid,) = db.execute("SELECT point_id FROM points ORDER BY run_order LIMIT 1").fetchone()
        db.execute("UPDATE points SET config = ? WHERE point_id = ?", (json.dumps({"model": "?"}), pid))
    proc = run_cli("sweep", "status", str(study.root), "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert list(study.root.glob("ledger.sqlite.damaged-*")), "the damaged ledger is kept aside"
    assert pid in {p["point_id"] for p in json.loads(proc.stdout)["points"]}
