"""The Slurm backend's submit path with a stand-in `sbatch` on PATH (the subprocess boundary submitit calls):
one sbatch per shape, handles recorded per array element, refusals fail only their array, transient failures
are retried. The real thing is tested against the local cluster in tests/slurm/."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Handle, Launch, Update
from studyctl.backends.slurm import SlurmBackend
from studyctl.backends.slurm import submit as slurm_submit
from studyctl.definition.inputs.options import SlurmOptions
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.states import FailureClass, State
from studyctl.study.launches import new_launch
from tests.unit.fakes import FakeSlurm, write_sweep

SBATCH = """\
#!{python}
import json, sys
from pathlib import Path
state = Path({state!r})
answers = json.loads(state.read_text())
code, out, err = answers.pop(0) if len(answers) > 1 else answers[0]
state.write_text(json.dumps(answers))
with open({calls!r}, "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(code)
"""


@pytest.fixture
def sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(answers file, calls log): each sbatch call takes the next [exit code, stdout, stderr] (the last repeats)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    answers, calls = tmp_path / "sbatch-answers.json", tmp_path / "sbatch-calls.log"
    answers.write_text(json.dumps([[0, "Submitted batch job 4100\n", ""]]))
    (bin_dir / "sbatch").write_text(SBATCH.format(python=sys.executable, state=str(answers), calls=str(calls)))
    for name in ("srun", "sacct", "squeue", "scancel"):  # present on PATH; FakeSlurm answers for them
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return answers, calls


def launches(tmp_path: Path, backend: SlurmBackend, nodes: str = "1") -> list[Launch]:
    sweep_path = write_sweep(tmp_path)
    sweep_path.write_text(sweep_path.read_text().replace("nodes: 1", f"nodes: {nodes}"))
    sweep = load_sweep(sweep_path)
    paths = StudyPaths(tmp_path / "results" / "s")
    return [new_launch(paths, sweep, backend, pp.point, 1) for pp in expand(sweep) if not pp.excluded]


def backend_for(tmp_path: Path, slurm: FakeSlurm) -> SlurmBackend:
    options = SlurmOptions(partition="debug", time_limit_min=5, max_array_size=100)
    return SlurmBackend(options, tmp_path / "results" / "s" / "slurm", runner=slurm)


def test_one_sbatch_per_shape_and_a_handle_per_element(tmp_path: Path, sbatch: tuple[Path, Path]) -> None:
    _, calls = sbatch
    backend = backend_for(tmp_path, FakeSlurm())
    todo = launches(tmp_path, backend, nodes="[1, 2]")
    handles: dict[str, Handle] = {}
    updates: list[Update] = []
    backend.launch(todo, lambda la, h: handles.__setitem__(la.point_id, h), updates.append)
    assert backend.sbatch_calls == 2 and len(calls.read_text().splitlines()) == 2  # 8 points, 2 shapes
    assert sorted(h.job_id for h in handles.values() if h.job_id) == sorted([f"4100_{i}" for i in range(4)] * 2)
    assert {u.state for u in updates} == {State.PENDING} and len(updates) == 8
    manifests = list((backend.folder / "manifests").glob("*.json"))
    assert len(manifests) == 2  # written before sbatch: how a crash between sbatch and the ledger is recovered


def test_a_refusal_fails_only_its_array_with_slurms_words(tmp_path: Path, sbatch: tuple[Path, Path]) -> None:
    answers, calls = sbatch
    answers.write_text(json.dumps([
        [1, "", "sbatch: error: Batch job submission failed: Invalid partition name specified\n"],
        [0, "Submitted batch job 4200\n", ""]]))
    backend = backend_for(tmp_path, FakeSlurm())
    todo = launches(tmp_path, backend, nodes="[1, 2]")
    updates: list[Update] = []
    backend.launch(todo, lambda la, h: None, updates.append)
    failed = [u for u in updates if u.state is State.FAILED]
    assert len(failed) == 4 and {u.failure_class for u in failed} == {FailureClass.SCHEDULER}
    assert {u.reason for u in failed} == {"Slurm rejected the job: Batch job submission failed: Invalid partition "
                                          "name specified"}
    assert len([u for u in updates if u.state is State.PENDING]) == 4
    assert len(calls.read_text().splitlines()) == 2  # a refusal is not retried


def test_a_transient_failure_is_retried(tmp_path: Path, sbatch: tuple[Path, Path],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    answers, calls = sbatch
    answers.write_text(json.dumps([
        [1, "", "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"],
        [0, "Submitted batch job 4300\n", ""]]))
    monkeypatch.setattr(slurm_submit, "SBATCH_RETRY_DELAYS_S", (0.1, 0.1))
    slurm = FakeSlurm()  # squeue knows no job of that name: the timed-out sbatch was not accepted
    backend = backend_for(tmp_path, slurm)
    todo = launches(tmp_path, backend)
    handles: list[Handle] = []
    backend.launch(todo, lambda la, h: handles.append(h), lambda u: None)
    assert len(calls.read_text().splitlines()) == 2 and backend.sbatch_calls == 2
    assert [h.job_id for h in handles] == [f"4300_{i}" for i in range(4)]
    assert any(c[0] == "squeue" for c in slurm.calls)  # looked for an accepted array by name before retrying
