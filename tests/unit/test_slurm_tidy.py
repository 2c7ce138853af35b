"""The clean-up job of a node-local tier under Slurm, with sbatch, sacct and scontrol played at the subprocess
boundary: a place counts as clean only once its job COMPLETED, the job waits for the attempt's job to be over on
every node, and one that ended otherwise is submitted again (the real cluster: tests/slurm/test_slurm_cleanup.py)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studyctl.backends.slurm import SlurmBackend
from studyctl.definition.checkpoint.places import Place
from studyctl.definition.inputs.options import SlurmOptions
from tests.unit.fakes import FakeSlurm, sacct_line

POINT = "0123456789ab"
ATTEMPT_JOB = "500_3"


@dataclass
class TidySlurm(FakeSlurm):
    """FakeSlurm that also takes sbatch (ids from 900 up) and expands hostlists."""

    next_id: int = 900
    refuse_dependency: bool = False
    sbatches: list[list[str]] = field(default_factory=list)

    def __call__(self, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
        if cmd[0] == "scontrol":
            return subprocess.CompletedProcess(cmd, 0, {"n[1-2]": "n1\nn2\n", "n3": "n3\n"}[cmd[-1]], "")
        if cmd[0] == "sbatch":
            self.calls.append(list(cmd))
            if self.refuse_dependency and any(a.startswith("--dependency") for a in cmd):
                return subprocess.CompletedProcess(cmd, 1, "", "sbatch: error: Job dependency problem\n")
            self.sbatches.append(list(cmd))
            self.next_id += 1
            return subprocess.CompletedProcess(cmd, 0, f"{self.next_id}\n", "")
        return super().__call__(cmd, **kw)


def backend(tmp_path: Path, slurm: TidySlurm) -> SlurmBackend:
    made = SlurmBackend(SlurmOptions(partition="debug", time_limit_min=5), tmp_path / "slurm", runner=slurm)
    made.watcher.min_interval_s = 0.0  # every question is asked afresh, as by a later command
    return made


def tier() -> Place:
    return Place("/tmp/tier-{node}", "s.k", POINT, node_local=True)


def remove(made: SlurmBackend, node_list: str | None = "n[1-2]", job_id: str | None = ATTEMPT_JOB) -> bool:
    return made.remove_node_local(tier(), point=None, node_list=node_list, job_id=job_id)  # type: ignore[arg-type]


def tidy_state(slurm: TidySlurm, state: str, job_id: str | None = None) -> None:
    slurm.sacct = [sacct_line(job_id or str(slurm.next_id), "studyctl_tidy_s", state, nodes="n[1-2]")]


def test_the_place_is_clean_only_once_its_job_completed(tmp_path: Path) -> None:
    slurm = TidySlurm()
    made = backend(tmp_path, slurm)
    assert not remove(made)  # handed to a job: not clean yet
    (cmd,) = slurm.sbatches
    assert "--nodelist=n1,n2" in cmd and "--nodes=2" in cmd
    assert f"--dependency=afterany:{ATTEMPT_JOB}" in cmd  # starts once the attempt's job is over on every node
    assert "studyctl_tidy_s" in " ".join(cmd) and f"-m worker.tidy '/tmp/tier-{{node}}' s.k {POINT}" in cmd[-1]
    for state in ("PENDING", "RUNNING"):
        tidy_state(slurm, state)
        assert not remove(made)
    slurm.sacct = []  # not in accounting yet
    assert not remove(made)
    assert len(slurm.sbatches) == 1  # asked about, never submitted twice while it may still run
    tidy_state(slurm, "COMPLETED")
    assert remove(made)
    assert list((tmp_path / "slurm" / "tidy").iterdir()) == []
    assert len(slurm.sbatches) == 1


def test_a_clean_up_job_that_ended_otherwise_is_submitted_again(tmp_path: Path) -> None:
    slurm = TidySlurm()
    made = backend(tmp_path, slurm)
    assert not remove(made)
    for ended in ("FAILED", "CANCELLED by 0", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
        before = slurm.next_id
        tidy_state(slurm, ended)
        assert not remove(made), ended
        assert slurm.next_id == before + 1, ended
    tidy_state(slurm, "COMPLETED")
    assert remove(made)
    assert len(slurm.sbatches) == 6


def test_records_of_two_attempts_and_two_places_are_apart(tmp_path: Path) -> None:
    slurm = TidySlurm()
    made = backend(tmp_path, slurm)
    assert not remove(made, job_id="500_3")
    assert not remove(made, job_id="500_4")
    other = Place("/tmp/other-{node}", "s.k", POINT, node_local=True)
    assert not made.remove_node_local(other, point=None, node_list="n3", job_id="500_3")  # type: ignore[arg-type]
    assert len(slurm.sbatches) == 3
    assert sorted(made.tidy.all_ids()) == ["901", "902", "903"]
    tidy_state(slurm, "COMPLETED", "902")
    assert remove(made, job_id="500_4") and not remove(made, job_id="500_3")


def test_nothing_is_submitted_where_nothing_ran(tmp_path: Path) -> None:
    slurm = TidySlurm()
    made = backend(tmp_path, slurm)
    assert made.remove_node_local(tier(), point=None, node_list="n[1-2]", completed=True)  # type: ignore[arg-type]
    assert remove(made, node_list=None, job_id=None)
    slurm.sacct = [sacct_line(ATTEMPT_JOB, "studyctl-s-x", "CANCELLED by 0", nodes="None assigned")]
    assert remove(made, node_list=None)  # cancelled while pending
    slurm.sacct = []
    assert not remove(made, node_list=None)  # accounting does not know it yet: a later command
    assert slurm.sbatches == []


def test_a_slurm_that_refuses_the_dependency_gets_the_job_without_it(tmp_path: Path) -> None:
    slurm = TidySlurm(refuse_dependency=True)
    made = backend(tmp_path, slurm)
    assert not remove(made)
    (cmd,) = slurm.sbatches
    assert not any(a.startswith("--dependency") for a in cmd)
    assert made.tidy.all_ids() == ["901"]
