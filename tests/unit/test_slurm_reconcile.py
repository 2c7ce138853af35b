"""The real SlurmBackend under reconcile, status and cancel, with squeue/sacct/scancel played by FakeSlurm:
never-submitted attempts, handles found again by job name, stale-state notes, requeue budget, cancel."""

from __future__ import annotations

import time
from pathlib import Path

from studyctl import api
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Handle, Launch
from studyctl.backends.slurm import SlurmBackend, job_name
from studyctl.backends.slurm.sacct import index_of
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import SweepFile, load_sweep
from studyctl.states import State
from studyctl.study.launches import new_launch
from studyctl.study.ledger import Ledger
from studyctl.study.reconcile import reconcile
from studyctl.study.store import sync_points
from tests.unit.fakes import FakeSlurm, registered, sacct_line, write_sweep


def slurm_study(tmp_path: Path, slurm: FakeSlurm) -> tuple[StudyPaths, SweepFile, SlurmBackend, list[Launch]]:
    """A four-point study whose attempts were opened on Slurm (SUBMITTED, no job ids yet)."""
    sweep_path = write_sweep(tmp_path)
    sweep = load_sweep(sweep_path)
    paths = StudyPaths((tmp_path / "results" / "s").resolve())
    backend = SlurmBackend(sweep.slurm, paths.slurm, runner=slurm)
    with Ledger(paths.ledger) as ledger:
        paths.sweep_copy.write_text(sweep_path.read_text())
        ledger.set_meta(source_path=str(sweep_path), study="s", backend="slurm")
        planned = expand(sweep)
        sync_points(ledger, planned)
        numbers = ledger.new_attempts([(pp.point.point_id, "slurm") for pp in planned], State.SUBMITTED)
        launches = [new_launch(paths, sweep, backend, pp.point, numbers[pp.point.point_id]) for pp in planned]
    return paths, sweep, backend, launches


def _handle(job_id: str) -> Handle:
    return Handle(job_id=job_id, array_index=index_of(job_id))


def states(paths: StudyPaths) -> dict[str, tuple[State, str | None, str | None]]:
    with Ledger(paths.ledger) as ledger:
        return {a.point_id: (a.state, a.job_id, a.reason) for a in ledger.attempts()}


def age(paths: StudyPaths, seconds: float) -> None:
    with Ledger(paths.ledger) as ledger:
        ledger._db.execute("UPDATE attempts SET submitted_at = ?", (time.time() - seconds,))


def test_attempts_that_never_reached_slurm_become_lost_after_the_grace(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    paths, sweep, backend, _launches = slurm_study(tmp_path, slurm)
    with Ledger(paths.ledger) as ledger:
        reconcile(paths, ledger, sweep, {"slurm": backend})
    assert {s for s, _, _ in states(paths).values()} == {State.SUBMITTED}  # sbatch may still be answering
    age(paths, 600)
    with Ledger(paths.ledger) as ledger:
        found = reconcile(paths, ledger, sweep, {"slurm": backend})
    assert not found.alive  # Slurm supervises its jobs: nothing to adopt
    after = states(paths)
    assert {s for s, _, _ in after.values()} == {State.LOST}
    assert all("never reached the scheduler" in (r or "") for _, _, r in after.values())
    assert any(c[0] == "squeue" for c in slurm.calls)  # looked for the jobs by name first


def test_jobs_found_by_name_get_their_handles_and_states(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    paths, sweep, backend, launches = slurm_study(tmp_path, slurm)
    manifest = backend.manifests.write(launches)  # as submit writes it before sbatch
    name = job_name("s", manifest)
    slurm.squeue = [f"77_[0-3]|{name}"]
    slurm.sacct = [sacct_line("77_0", name, "RUNNING"), sacct_line("77_1", name, "COMPLETED", end="1"),
                   sacct_line("77_[2-3%2]", name, "PENDING", nodes="")]
    age(paths, 600)
    with Ledger(paths.ledger) as ledger:
        reconcile(paths, ledger, sweep, {"slurm": backend})
    after = states(paths)
    by_index = [after[la.point_id] for la in launches]
    assert [job for _, job, _ in by_index] == ["77_0", "77_1", "77_2", "77_3"]
    assert [s for s, _, _ in by_index] == [State.RUNNING, State.FAILED, State.PENDING, State.PENDING]
    assert "completed but the worker left no result.json" in (by_index[1][2] or "")


def test_sacct_failing_is_a_note_not_a_verdict(tmp_path: Path) -> None:
    slurm = FakeSlurm(sacct_error="slurmdbd: Connection refused")
    paths, _sweep, backend, launches = slurm_study(tmp_path, slurm)
    with Ledger(paths.ledger) as ledger:
        ledger.record_handles([(la.point_id, la.attempt, _handle(f"9_{i}")) for i, la in enumerate(launches)])
    age(paths, 3600)  # long past the vanished-job grace: still no verdict while sacct cannot be read
    with registered(backend):
        rep = api.status("s", tmp_path / "results")
    assert rep.backend_note == "slurm: sacct failed: slurmdbd: Connection refused"
    assert rep.counts == {"SUBMITTED": 4} and not rep.done


def test_a_job_over_its_requeue_budget_is_cancelled_as_preempted(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    paths, sweep, backend, launches = slurm_study(tmp_path, slurm)
    first = launches[0]
    with Ledger(paths.ledger) as ledger:
        ledger.record_handles([(first.point_id, first.attempt, _handle("5"))])
    name = job_name("s", "0123abcd")
    runs = sweep.slurm.max_requeues + 2  # one line per run with sacct -D
    slurm.sacct = [sacct_line("5", name, "REQUEUED")] * (runs - 1) + [sacct_line("5", name, "RUNNING")]
    with Ledger(paths.ledger) as ledger:
        reconcile(paths, ledger, sweep, {"slurm": backend})
    state, _, reason = states(paths)[first.point_id]
    assert state is State.PREEMPTED and "max_requeues" in (reason or "")
    assert slurm.scancelled() == ["5"]


def test_cancel_scancels_recorded_and_recovered_jobs(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    paths, _sweep, backend, launches = slurm_study(tmp_path, slurm)
    recorded, lost = launches[:2], launches[2:]
    with Ledger(paths.ledger) as ledger:
        ledger.record_handles([(la.point_id, la.attempt, _handle(f"3_{i}")) for i, la in enumerate(recorded)])
    name = job_name("s", backend.manifests.write(lost))
    slurm.squeue = [f"4_0|{name}", f"4_1|{name}"]
    with registered(backend):
        assert api.cancel("s", tmp_path / "results") == 4
    assert sorted(slurm.scancelled()) == ["3_0", "3_1", "4_0", "4_1"]
    assert {s for s, _, _ in states(paths).values()} == {State.CANCELLED}


def test_a_lost_ledger_gives_slurm_attempts_back_to_slurm(tmp_path: Path) -> None:
    """Rebuilt from disk, attempts in the study's manifests are Slurm's: found by job name, not rerun locally."""
    slurm = FakeSlurm()
    paths, _, backend, launches = slurm_study(tmp_path, slurm)
    name = job_name("s", backend.manifests.write(launches))
    slurm.squeue = [f"81_[0-3]|{name}"]
    slurm.sacct = [sacct_line(f"81_{i}", name, "RUNNING") for i in range(4)]
    paths.ledger.unlink()
    with registered(backend):
        rep = api.status("s", tmp_path / "results")
    assert rep.counts == {"RUNNING": 4} and "4 attempts on disk" in rep.notes[0]
    with Ledger(paths.ledger) as ledger:
        assert {(a.backend, a.job_id) for a in ledger.attempts()} == {("slurm", f"81_{i}") for i in range(4)}
