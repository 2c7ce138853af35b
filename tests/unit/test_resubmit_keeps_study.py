"""`resubmit` keeps the study: an edited source sweep is adopted only if it passes submit's same-study check
(`study/same_study.py`); otherwise the study's recorded sweep is used and the user is told. Completed points
are never dropped, the original sweep is never refused afterwards, `collect` never pools two sweeps, and a
point left PLANNED makes the command exit 1."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from studyctl import api
from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.states import FailureClass, State
from studyctl.study.ledger import Ledger
from studyctl.study.status import read_points
from tests.cli import run_cli
from tests.unit.fakes import FakeSupervisor, registered, study_paths, write_sweep

# Each edit of the source sweep, and whether it is still the same study (submit would accept it).
EDITS = {
    "every point changed": ("writes: 1", "writes: 2", False),
    "points dropped": ("zero_stage: [0, 1, 2, 3]", "zero_stage: [0, 1]", False),
    "another model": ("models: [gpt2-125m]", "models: [gpt2-350m]", False),
    "another study name": ("study: s", "study: t", False),
    "broken YAML": ("matrix: {", "matrix: {{", False),
    "widened": ("ranks_per_node: 1", "ranks_per_node: [1, 2]", True),
    "comment only": ("models:", "# tuned\nmodels:", True),
}


class FailsOnce(FakeSupervisor):
    """Runs like the local backend; the first attempt of ZeRO stage 3 on one rank fails (no result file)."""

    name = "failsonce"

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        for launch in launches:
            self.launched.append(launch)
            record_handle(launch, Handle(pid=4242))
            if launch.point.zero_stage == 3 and launch.point.ranks_per_node == 1 and launch.attempt == 1:
                record_update(Update(launch.point_id, launch.attempt, State.FAILED, FailureClass.IO_ERROR, "EIO"))
                continue
            self.finish(launch)
            record_update(Update(launch.point_id, launch.attempt, State.COMPLETED))


def study_with_a_failure(tmp_path: Path, backend: FailsOnce) -> tuple[Path, Path, set[str]]:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, backend.name, results)
    assert api.status("s", results).counts == {"COMPLETED": 3, "FAILED": 1}
    return sweep, results, {la.point_id for la in backend.launched}


def in_sweep(results: Path) -> set[str]:
    with Ledger(study_paths(results).ledger, readonly=True) as ledger:
        return {p.point_id for p in ledger.points()}


@pytest.mark.parametrize("edit", [e for e, (_, _, same) in EDITS.items() if not same])
def test_resubmit_runs_from_the_recorded_sweep_when_the_source_became_another_study(tmp_path: Path,
                                                                                   edit: str) -> None:
    old, new, _ = EDITS[edit]
    with registered(FailsOnce()) as backend:
        sweep, results, original = study_with_a_failure(tmp_path, backend)
        text = sweep.read_text()
        sweep.write_text(text.replace(old, new, 1))
        proc = run_cli("sweep", "resubmit", "s", "--results", str(results))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "is not this study's sweep any more" in " ".join(proc.stderr.split())
        assert "ran from the study's recorded sweep" in " ".join(proc.stderr.split())
        assert "states: COMPLETED 4" in proc.stdout
        assert study_paths(results).sweep_copy.read_text() == text  # the record is not rewritten
        assert in_sweep(results) == original  # nothing dropped, nothing added
        assert {la.point_id for la in backend.launched} == original and len(backend.launched) == 5
        sweep.write_text(text)  # the original sweep is still this study
        again = api.submit(sweep, backend.name, results)
    assert again.launched == 0 and again.skipped_completed == 4
    assert {r.point_id for r in read_points(study_paths(results))} == original  # collect's points


@pytest.mark.parametrize("edit", [e for e, (_, _, same) in EDITS.items() if same])
def test_resubmit_adopts_a_source_sweep_that_submit_would_accept(tmp_path: Path, edit: str) -> None:
    old, new, _ = EDITS[edit]
    with registered(FailsOnce()) as backend:
        sweep, results, original = study_with_a_failure(tmp_path, backend)
        sweep.write_text(sweep.read_text().replace(old, new, 1))
        rep = api.resubmit("s", results)
        assert rep.launched == 1 and not rep.notes
        assert study_paths(results).sweep_copy.read_text() == sweep.read_text()
        assert original <= in_sweep(results)  # completed points kept
        counts = api.status("s", results).counts
    added = len(in_sweep(results)) - 4
    assert counts == ({"COMPLETED": 4, "PLANNED": added} if added else {"COMPLETED": 4})


def test_a_point_left_planned_after_resubmit_exits_1_and_says_how_to_run_it(tmp_path: Path) -> None:
    old, new, _ = EDITS["widened"]
    with registered(FailsOnce()) as backend:
        sweep, results, _ = study_with_a_failure(tmp_path, backend)
        sweep.write_text(sweep.read_text().replace(old, new, 1))
        proc = run_cli("sweep", "resubmit", "s", "--results", str(results))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        out = " ".join(proc.stdout.split())
        assert "4 not run yet (PLANNED); run them with: studyctl sweep submit" in out
        done = run_cli("sweep", "submit", str(study_paths(results).sweep_copy), "--backend", backend.name,
                       "--results", str(results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "states: COMPLETED 8" in done.stdout
