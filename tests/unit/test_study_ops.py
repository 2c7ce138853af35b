"""submit, status (reconcile), resubmit and cancel against a FakeBackend: states, attempt numbers, LOST,
adopted attempts, notes; and the CLI's follow-up hints, learned from the backend's capabilities."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from studyctl import api
from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate
from studyctl.errors import UserError
from studyctl.states import State
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.unit.fakes import FakeBackend, FakeSupervisor, registered, study_paths, write_sweep


def attempts(results: Path, name: str = "s") -> dict[str, list[tuple[int, State]]]:
    with Ledger(study_paths(results, name).ledger) as ledger:
        out: dict[str, list[tuple[int, State]]] = {}
        for a in ledger.attempts():
            out.setdefault(a.point_id, []).append((a.attempt, a.state))
        return out


@pytest.fixture
def fake() -> FakeBackend:
    with registered(FakeBackend(time_limit=90)) as backend:
        yield backend


def test_submit_hands_new_points_to_the_backend_once(tmp_path: Path, fake: FakeBackend) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    rep = api.submit(sweep, "fake", results)
    assert rep.launched == 4 and rep.backend == "fake" and not rep.runs_to_completion
    assert [la.attempt for la in fake.launched] == [1, 1, 1, 1]
    assert all(la.time_limit_s == 90 and la.paths.task.is_file() for la in fake.launched)
    assert {s for rows in attempts(results).values() for _, s in rows} == {State.PENDING}
    again = api.submit(sweep, "fake", results)
    assert again.launched == 0 and again.skipped_active == 4 and len(fake.launched) == 4


def test_status_trusts_result_files_then_the_backend(tmp_path: Path, fake: FakeBackend) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    done, failed, running, lying = fake.launched
    fake.finish(done)
    fake.states[failed.point_id] = State.FAILED
    fake.states[running.point_id] = State.RUNNING
    fake.finish(lying)
    fake.states[lying.point_id] = State.FAILED  # the result file wins over the backend
    rep = api.status("s", results)
    assert rep.counts == {"COMPLETED": 2, "FAILED": 1, "RUNNING": 1} and not rep.done
    polled = {a.launch.point_id for a in fake.polled[-1]}
    assert polled == {failed.point_id, running.point_id}  # result files first: only the rest is asked
    row = {p.point_id: p for p in rep.points}[done.point_id]
    assert row.latest is not None and row.latest.result_path == str(done.paths.result)


def test_resubmit_reruns_failed_points_as_new_attempts(tmp_path: Path, fake: FakeBackend) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    ok, bad, also_bad, queued = fake.launched
    fake.finish(ok)
    fake.states.update({bad.point_id: State.FAILED, also_bad.point_id: State.TIMEOUT})
    rep = api.resubmit("s", results)  # the study's recorded backend
    assert rep.launched == 2 and rep.backend == "fake"
    rows = attempts(results)
    assert rows[bad.point_id] == [(1, State.FAILED), (2, State.PENDING)]
    assert rows[also_bad.point_id] == [(1, State.TIMEOUT), (2, State.PENDING)]
    assert rows[ok.point_id] == [(1, State.COMPLETED)] and rows[queued.point_id] == [(1, State.PENDING)]
    fake.states.clear()
    with pytest.raises(UserError, match=f"--point: {queued.point_id} attempt 1 is still PENDING") as refused:
        api.resubmit("s", results, point_ids=[queued.point_id, ok.point_id])  # two attempts never run at once
    assert refused.value.exit_code == 1 and len(fake.launched) == 6
    named = api.resubmit("s", results, point_ids=[ok.point_id])
    assert named.launched == 1 and attempts(results)[ok.point_id] == [(1, State.COMPLETED), (2, State.PENDING)]
    fake.states.update({la.point_id: State.FAILED for la in fake.launched})
    capped = api.resubmit("s", results, max_attempts=2)
    assert capped.launched == 1 and capped.waiting_for_failed == 3
    with pytest.raises(UserError, match="--point: nope not in study s"):
        api.resubmit("s", results, point_ids=["nope"])


@pytest.mark.parametrize("live", [State.RUNNING, State.PENDING, State.SUBMITTED])
def test_resubmit_refuses_live_states(tmp_path: Path, fake: FakeBackend, live: State) -> None:
    """`resubmit --state RUNNING` would start attempt 2 beside a live attempt 1: refused in one line."""
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    fake.states.update({la.point_id: State.RUNNING for la in fake.launched})
    with pytest.raises(UserError, match=f"--state: {live.value} attempts are alive") as refused:
        api.resubmit("s", results, states=[State.FAILED, live])
    assert refused.value.exit_code == 2 and len(fake.launched) == 4
    assert {s for rows in attempts(results).values() for _, s in rows} == {State.PENDING}


def test_an_attempt_without_its_task_file_is_lost_and_submit_reruns_it(tmp_path: Path, fake: FakeBackend) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    gone = fake.launched[0]
    gone.paths.task.unlink()
    rep = api.status("s", results)
    row = {p.point_id: p for p in rep.points}[gone.point_id]
    assert row.state is State.LOST and row.latest is not None and "task.json missing" in (row.latest.reason or "")
    again = api.submit(sweep, "fake", results)
    assert again.launched == 1 and attempts(results)[gone.point_id] == [(1, State.LOST), (2, State.PENDING)]


def test_recovered_handles_are_recorded(tmp_path: Path, fake: FakeBackend) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    first = fake.launched[0]
    with Ledger(study_paths(results).ledger) as ledger:  # as if studyctl died before recording the job id
        ledger._db.execute("UPDATE attempts SET job_id = NULL WHERE point_id = ?", (first.point_id,))
    fake.recoverable[first.point_id] = Handle(job_id="found-by-name")
    rep = api.status("s", results)
    row = {p.point_id: p for p in rep.points}[first.point_id]
    assert row.latest is not None and row.latest.job_id == "found-by-name"


def test_backend_notes_reach_status(tmp_path: Path, fake: FakeBackend) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    assert api.status("s", results).backend_note is None
    fake.stale = "accounting unreachable"
    assert api.status("s", results).backend_note == "fake: accounting unreachable"


def test_cancel_records_then_stops_every_active_attempt(tmp_path: Path, fake: FakeBackend) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    fake.finish(fake.launched[0])
    api.status("s", results)
    assert api.cancel("s", results) == 3
    assert sorted(a.launch.point_id for a in fake.cancelled) == sorted(la.point_id for la in fake.launched[1:])
    assert all(a.launch.time_limit_s == 90 for a in fake.cancelled)
    assert api.status("s", results).counts == {"COMPLETED": 1, "CANCELLED": 3}
    assert api.cancel("s", results) == 0


def test_adopted_attempts_keep_their_time_limit_from_their_start(tmp_path: Path) -> None:
    """An attempt a killed studyctl left running is handed to the next launch with its point's limit."""
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(FakeSupervisor(time_limit=77)) as sup:
        api.submit(sweep, "fakelocal", results)
        orphan = sup.launched[0]
        orphan.paths.result.unlink()
        started = time.time() - 30
        with Ledger(study_paths(results).ledger) as ledger:  # kill -9 mid-run: RUNNING since 30 s
            ledger._db.execute("UPDATE attempts SET state = 'RUNNING', started_at = ? WHERE point_id = ?",
                               (started, orphan.point_id))
        rep = api.submit(sweep, "fakelocal", results)
        assert rep.launched == 0 and rep.skipped_active == 1 and rep.runs_to_completion
        (adopted,) = sup.adopted
        assert adopted.launch.point_id == orphan.point_id and adopted.launch.attempt == 1
        assert adopted.launch.time_limit_s == 77 and adopted.since == pytest.approx(started)


class _Queued(FakeSupervisor):
    """Never gets to start anything: what the ledger holds is the state attempts were opened in."""

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        self.launched += launches


class _Handed(FakeBackend):
    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        self.launched += launches


@pytest.mark.parametrize(("backend", "state"), [(_Queued(), State.PLANNED), (_Handed(), State.SUBMITTED)])
def test_new_attempts_open_in_the_backends_initial_state(tmp_path: Path, backend: FakeBackend, state: State) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(backend):
        api.submit(sweep, backend.name, results)
    assert {s for rows in attempts(results).values() for _, s in rows} == {state}
    assert len(backend.launched) == 4


def test_unknown_backend_is_a_usage_error_naming_the_backends(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--backend: 'pbs' is not one of local, slurm"):
        api.submit(write_sweep(tmp_path), "pbs", tmp_path / "results")


def test_resubmit_without_backend_follows_the_studys_backend_in_its_hint(tmp_path: Path, fake: FakeBackend) -> None:
    """Bug: `sweep resubmit` without --backend printed its hint as if the study were local."""
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    api.submit(sweep, "fake", results)
    fake.states[fake.launched[0].point_id] = State.FAILED
    api.status("s", results)
    fake.states.clear()
    proc = run_cli("sweep", "resubmit", "s", "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    assert "resubmitted 1 points" in proc.stdout
    assert "follow with: studyctl sweep status s --watch" in proc.stdout


def test_a_backend_that_runs_to_completion_gets_no_follow_hint(tmp_path: Path) -> None:
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    with registered(FakeSupervisor()):
        proc = run_cli("sweep", "submit", str(sweep), "--backend", "fakelocal", "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    assert "running 4 on fakelocal" in proc.stdout and "follow with" not in proc.stdout
    assert "states: COMPLETED 4" in proc.stdout


def test_status_names_the_settings_that_tell_points_of_one_shape_apart(tmp_path: Path, fake: FakeBackend,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Points of one shape that differ in their strategy and restore: the table gains their settings, a sync
    point's absent step settings (which follow its strategy) not among them; the report's points say the same."""
    sweep, results = write_sweep(tmp_path), tmp_path / "results"
    text = sweep.read_text().replace("zero_stage: [0, 1, 2, 3]", "zero_stage: 1, strategy: [sync, async], "
                                     "restore: [rank, full]")
    sweep.write_text(text)
    api.submit(sweep, "fake", results)
    monkeypatch.setenv("COLUMNS", "300")
    shown = run_cli("sweep", "status", "s", "--results", str(results)).stdout
    rows = [line for line in shown.splitlines() if "PENDING" in line or "QUEUED" in line or "restore" in line]
    said = {f"restore {r}, strategy {s}" for s in ("sync", "async") for r in ("rank", "full")}  # the options order
    assert "settings" in shown and {s for s in said if any(s in row for row in rows)} == said
    assert "step_s" not in shown and "compute" not in shown
    labels = {p.point_id: p.label for p in api._point_statuses(study_paths(results, "s"))}
    assert {label.split(", ", 1)[1] for label in labels.values()} == said
