"""The recovery table and cells, and the cost model's restart R from a measured time to first step after a failure,
from hand-made result files: where R came from is said in every row."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from studyctl.analysis.recovery.table import ONE_CLOCK
from studyctl.analysis.stats import t_quantile_975
from studyctl.analysis.tables import build_tables
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.checkpoint.recovery import parse_recovery
from tests.resultgen import _write, make_point, recovery_timing, result_dict

SPREAD = (0.9, 1.0, 1.1)
PHASES = {"launch_s": 2.0, "restore_s": 0.5, "ready_s": 0.25}


def _study(tmp_path: Path, training: str = "training: {node_mtbf_h: 1000, nodes: 16}\n") -> Path:
    study = tmp_path / "rec"
    study.mkdir()
    (study / "sweep.yaml").write_text(f"study: rec\n{training}")
    return study


def _timing(p: Point, k: float) -> dict[str, Any]:
    return recovery_timing(p, *(PHASES[n] * k for n in ("launch_s", "restore_s", "ready_s")))


def _reps(study: Path, recovery: str | None, launch_s: float = 0.3) -> list[Point]:
    made = []
    for rep, k in enumerate(SPREAD):
        p = make_point(rep=rep, writes=1, reads=1).model_copy(update={"recovery": parse_recovery(recovery)})
        data = result_dict(p, [2.0], [3.0], study=study.name)
        data["provenance"]["launch_s"] = launch_s
        if recovery is not None:
            data["recovery"] = _timing(p, k)
        _write(study, p, json.loads(json.dumps(data)))
        made.append(p)
    return made


def test_recovery_cells_pool_the_repetitions_with_a_ci_and_flags(tmp_path: Path) -> None:
    study = _study(tmp_path)
    _reps(study, "same")
    cells = build_tables(study).recovery_cells.to_dict("records")
    assert len(cells) == 1
    c = cells[0]
    samples = [sum(PHASES.values()) * k for k in SPREAD]
    mean = sum(samples) / 3
    sd = math.sqrt(sum((s - mean) ** 2 for s in samples) / 2)
    assert c["n"] == 3 and c["recovery"] == "same"
    assert c["time_to_first_step_s"] == pytest.approx(mean)
    assert c["time_to_first_step_s_ci95"] == pytest.approx(t_quantile_975(2) * sd / math.sqrt(3))
    assert c["same_shape_restore_s"] > 0 and ONE_CLOCK in c["flags"]


def test_R_is_the_measured_time_to_first_step_and_says_so(tmp_path: Path) -> None:
    study = _study(tmp_path)
    _reps(study, "same")
    _reps(study, None)  # the same cell without a restart borrows it
    t = build_tables(study).training
    own = t[t["recovery"] == "same"]
    factor = own["restore_projection_factor"].to_numpy()
    expected = [(PHASES["launch_s"] + PHASES["restore_s"] * f + PHASES["ready_s"]) * 1 for f in factor]
    measured = own["restart_launch_s"] + own["restart_restore_s"] * factor + own["restart_ready_s"]
    assert list(own["restart_s"]) == pytest.approx(list(measured))
    assert own["restart_s"].mean() == pytest.approx(sum(expected) / 3)
    assert all("its own restart (recovery same)" in s for s in own["relaunch_source"])
    plain = t[t["recovery"].isna()]
    assert len(plain) == 3 and all("the cell's restart (recovery same)" in s for s in plain["restore_source"])
    # the borrowed restart is the cell's mean, not the point's own launch (0.3 s)
    assert plain["relaunch_s"].mean() == pytest.approx(PHASES["launch_s"])


def test_a_given_restart_replaces_the_measured_launch_only(tmp_path: Path) -> None:
    study = _study(tmp_path, "training: {node_mtbf_h: 1000, nodes: 16, restart_s: 100}\n")
    _reps(study, "same")
    t = build_tables(study).training
    assert set(t["relaunch_s"]) == {100.0} and set(t["relaunch_source"]) == {"given (training.restart_s)"}
    assert all(s.startswith("measured time to first step") for s in t["restore_source"])
    assert list(t["restart_s"]) == pytest.approx(list(100.0 + t["failure_restore_s"]))


def test_without_a_restart_R_is_as_before(tmp_path: Path) -> None:
    study = _study(tmp_path)
    _reps(study, None)
    t = build_tables(study).training
    assert set(t["relaunch_source"]) == {"measured launch"} and set(t["relaunch_s"]) == {0.3}
    assert build_tables(study).recovery.empty


def test_the_report_shows_the_time_to_first_step_per_scenario_with_its_plot(tmp_path: Path) -> None:
    from studyctl.analysis.collect import collect

    study = _study(tmp_path)
    _reps(study, "same")
    _reps(study, None)
    out = collect(study)
    assert any(p.kind == "recovery" and p.path.exists() for p in out.plots)
    md = out.report_md.read_text()
    section = md.split("## Time to the first training step after a failure", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| same "))
    assert f"{sum(PHASES.values()):.3f} ±" in row  # the mean of 0.9, 1.0, 1.1 × the phases, with its CI
    assert ONE_CLOCK in row
    assert (study / "tables" / "recovery.csv").exists()


def test_scenarios_of_one_cell_are_costed_on_a_shared_write(tmp_path: Path) -> None:
    """The same checkpoint written by a point that restarts and one that does not, at other speeds (the noise of
    identical writes): each repetition's write is their mean, so the two cells' C are equal and only R differs."""
    study = _study(tmp_path)
    for recovery, rate in (("same", 2.0), (None, 1.0)):
        for rep, k in enumerate(SPREAD):
            p = make_point(rep=rep, writes=1, reads=1).model_copy(update={"recovery": parse_recovery(recovery)})
            data = result_dict(p, [rate * k], [3.0], study=study.name)
            if recovery is not None:
                data["recovery"] = _timing(p, k)
            _write(study, p, json.loads(json.dumps(data)))
    tables = build_tables(study)
    t = tables.training
    for rep in range(3):
        pair = t[t["repetition"] == rep]
        assert pair["blocking_measured_s"].nunique() == 1 and len(pair) == 2
    assert all(s.startswith("shared: the mean write of 2 points") for s in t["write_source"])
    cells = tables.training_cells
    assert cells["checkpoint_cost_s"].nunique() == 1 and cells["checkpoint_cost_s_ci95"].nunique() == 1
    assert cells["checkpoint_cost_s_ci95"].iloc[0] > 0  # the repetitions' spread is still there
