"""`sweep submit` and `resubmit` exit codes: 0 all completed (or queued), 1 some point failed, 2 bad input."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.states import FailureClass, State
from tests.cli import run_cli
from tests.unit.fakes import FakeBackend, FakeSupervisor, registered, write_sweep


class EndsIn(FakeSupervisor):
    """Runs to completion like the local backend; points whose ZeRO stage is in `bad` end in `state`."""

    name = "endsin"
    runs_to_completion: ClassVar[bool] = True

    def __init__(self, state: State, bad: frozenset[int] = frozenset({3})) -> None:
        super().__init__()
        self.state, self.bad = state, bad

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        for launch in launches:
            self.launched.append(launch)
            record_handle(launch, Handle(pid=4242))
            if launch.point.zero_stage in self.bad:
                record_update(Update(launch.point_id, launch.attempt, self.state, FailureClass.IO_ERROR, "scripted"))
            else:
                self.finish(launch)
                record_update(Update(launch.point_id, launch.attempt, State.COMPLETED))


@pytest.mark.parametrize("state", [State.FAILED, State.TIMEOUT, State.LOST, State.OUT_OF_MEMORY, State.NODE_FAIL])
def test_submit_exits_1_when_a_point_ended_failed(tmp_path: Path, state: State) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(EndsIn(state)):
        proc = run_cli("sweep", "submit", str(sweep), "--backend", "endsin", "--results", str(results))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{state.value} 1" in proc.stdout and "1 failed; rerun them with" in proc.stdout


def test_submit_again_still_exits_1_while_a_failed_point_waits(tmp_path: Path) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(EndsIn(State.FAILED)):
        run_cli("sweep", "submit", str(sweep), "--backend", "endsin", "--results", str(results))
        again = run_cli("sweep", "submit", str(sweep), "--backend", "endsin", "--results", str(results))
    assert again.returncode == 1, again.stdout


def test_resubmit_exits_0_once_everything_completed_and_1_while_not(tmp_path: Path) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    backend = EndsIn(State.TIMEOUT)
    with registered(backend):
        run_cli("sweep", "submit", str(sweep), "--backend", "endsin", "--results", str(results))
        still = run_cli("sweep", "resubmit", "s", "--results", str(results))
        assert still.returncode == 1, still.stdout
        backend.bad = frozenset()
        fixed = run_cli("sweep", "resubmit", "s", "--results", str(results))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "states: COMPLETED 4" in fixed.stdout


def test_submit_exits_0_for_queued_points_and_2_for_bad_input(tmp_path: Path) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(FakeBackend()):
        queued = run_cli("sweep", "submit", str(sweep), "--backend", "fake", "--results", str(results))
    assert queued.returncode == 0, queued.stdout + queued.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(sweep.read_text().replace("zero_stage: [0, 1, 2, 3]", "zero_stage: [7]"))
    assert run_cli("sweep", "submit", str(bad), "--results", str(results)).returncode == 2


def test_the_exit_codes_are_in_the_help() -> None:
    for command in ("submit", "resubmit"):
        text = " ".join(run_cli("sweep", command, "--help").stdout.split())
        assert "1 some point of the study ended failed" in text
