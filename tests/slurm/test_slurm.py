"""The Slurm backend against the real local cluster (scripts/slurm-local-cluster.sh up), through the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Launch
from studyctl.backends.slurm import SlurmBackend
from studyctl.backends.slurm.sacct import expand_job_ids
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.inputs.options import SlurmOptions
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.states import FINAL_STATES, State
from studyctl.study.ledger import Ledger
from tests.cli import CliRun, run_cli
from tests.slurm.slurmdiag import diagnose

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module", autouse=True)
def cluster_up() -> None:
    ok = shutil.which("sinfo") and subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout
    if not ok or "UP" not in ok:
        pytest.fail("the local Slurm cluster is not up: run `bash scripts/slurm-local-cluster.sh up` (as root)")


def sweep_file(tmp_path: Path, name: str, body: str, fs: Path | None = None) -> Path:
    fs = fs or tmp_path / "fs"
    if not str(fs).startswith(str(tmp_path / "a-file")):
        fs.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    default = "" if "\ncheckpoint:" in f"\n{body}" else \
        "checkpoint: {scale: 0.002, writes: 2, reads: 2, buffer_mib: 4, block_mib: 4}\n"
    default += "" if "\nceilings:" in f"\n{body}" else "ceilings: off\n"  # the measure points alone, unless asked
    path.write_text(f"""\
study: {name}
models: [gpt2-125m]
calibration: {{enabled: false}}
filesystems:
  shared: {{path: {fs}}}
{default}{body}""")
    return path


def cli(tmp_path: Path, *args: str) -> CliRun:
    return run_cli(*args, "--results", str(tmp_path / "results"), cwd=tmp_path)


def diag(tmp_path: Path, study: str) -> str:
    """The cluster's and the study's jobs' evidence, for assertion messages."""
    return diagnose(tmp_path / "results" / study / "slurm")


def job_state(job_id: str) -> str:
    """squeue's state word for a job ("" once it left the queue)."""
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout.strip()


def not_completed(data: dict) -> list[dict]:
    """The points that did not complete, with everything status knows about them, for assertion messages."""
    return [p for p in data["points"] if p["state"] not in ("COMPLETED", "EXCLUDED")]


def wait_final(tmp_path: Path, name: str, timeout: float = 240) -> dict:
    end = time.monotonic() + timeout
    while True:
        proc = cli(tmp_path, "sweep", "status", name, "--json")
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        states = {p["state"] for p in data["points"] if p["state"] != "EXCLUDED"}
        if states <= {s.value for s in FINAL_STATES}:
            return data
        assert time.monotonic() < end, f"not final after {timeout} s: {not_completed(data)}" + diag(tmp_path, name)
        time.sleep(1.0)


def test_multi_node_study_completes_with_right_nodes(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, "multi", """\
matrix: {zero_stage: [1, 3]}
zip:
  - {nodes: [1, 2, 4], ranks_per_node: [2, 2, 1]}
slurm: {partition: debug, time_limit_min: 3}
""")
    t0 = time.monotonic()
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 < 30, "submit must return once submitted"
    data = wait_final(tmp_path, "multi")
    assert data["counts"] == {"COMPLETED": 6}, f"{not_completed(data)}{diag(tmp_path, 'multi')}"
    for p in data["points"]:
        result = json.loads(Path(p["result_path"]).read_text())
        prov = result["provenance"]
        assert prov["world_size"] == p["nodes"] * p["ranks_per_node"]
        assert len(prov["node_names"]) == p["nodes"] and not prov["simulated_nodes"]
        assert all(n.startswith("n") for n in prov["node_names"])
        assert prov["slurm"]["job_id"] and prov["slurm"]["cluster"] == "studylab"
        assert p["node_list"]


def test_sbatch_calls_equal_shapes(tmp_path: Path) -> None:
    sweep_path = sweep_file(tmp_path, "shapes", """\
matrix: {zero_stage: [0, 1, 2, 3], nodes: [1, 2], ranks_per_node: 1, io_mode: [buffered, direct]}
checkpoint: {scale: 0.001, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4}
slurm: {partition: debug, time_limit_min: 3, array_parallelism: 4}
""")
    sweep = load_sweep(sweep_path)
    points = [p.point for p in expand(sweep) if not p.excluded]
    assert len(points) == 16
    backend = SlurmBackend(SlurmOptions.model_validate(sweep.slurm), tmp_path / "slurm")
    launches = []
    for p in points:
        files = StudyPaths(tmp_path).attempt(p.point_id, 1)
        files.dir.mkdir(parents=True)
        task = WorkerTask(study="shapes", point_id=p.point_id, point=p, filesystem_path=str(tmp_path / "fs"),
                          result_path=str(files.result), error_path=str(files.error))
        files.task.write_text(task.model_dump_json())
        launches.append(Launch("shapes", p.point_id, 1, p, files, None))
    handles = []
    backend.launch(launches, lambda launch, h: handles.append(h), lambda u: None)
    assert backend.sbatch_calls == 2  # two shapes (1 and 2 nodes), not 16 points
    arrays = {h.job_id.split("_")[0] for h in handles}
    assert len(arrays) == 2 and len(handles) == 16
    assert sorted(h.array_index for h in handles) == sorted(list(range(8)) * 2)
    end = time.monotonic() + 180
    while not all(StudyPaths(tmp_path).attempt(p.point_id, 1).result.exists() for p in points):
        assert time.monotonic() < end
        time.sleep(1)


def test_failure_then_fix_and_resubmit(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    sweep = sweep_file(tmp_path, "fix", "matrix: {zero_stage: 1, nodes: 2, ranks_per_node: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 3}\n", fs=blocker / "fs")
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    data = wait_final(tmp_path, "fix")
    (point,) = data["points"]
    assert point["state"] == "FAILED" and str(blocker) in point["reason"]
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    sweep.write_text(sweep.read_text().replace(str(blocker / "fs"), str(fixed)))
    proc = cli(tmp_path, "sweep", "resubmit", "fix")
    assert proc.returncode == 0, proc.stderr
    data = wait_final(tmp_path, "fix")
    assert data["counts"] == {"COMPLETED": 1}
    with Ledger(tmp_path / "results" / "fix" / "ledger.sqlite") as ledger:
        attempts = ledger.attempts()
    assert [(a.attempt, a.state, a.backend) for a in attempts] == [
        (1, State.FAILED, "slurm"), (2, State.COMPLETED, "slurm")]
    assert attempts[0].job_id != attempts[1].job_id


def test_too_many_nodes_fails_with_slurms_message_and_others_run(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, "toobig", "matrix: {zero_stage: 1, nodes: [1, 5], ranks_per_node: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 3}\n")
    submitted = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert submitted.returncode == 1, submitted.stdout + submitted.stderr  # a point failed at submission
    data = wait_final(tmp_path, "toobig")
    by_nodes = {p["nodes"]: p for p in data["points"]}
    assert by_nodes[1]["state"] == "COMPLETED"
    assert by_nodes[5]["state"] == "FAILED" and by_nodes[5]["failure_class"] == "scheduler"
    assert "Node count specification invalid" in by_nodes[5]["reason"]


def test_cancel_gives_cancelled(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, "cancel", "matrix: {zero_stage: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 5, setup: ['sleep 120']}\n")
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    data = json.loads(cli(tmp_path, "sweep", "status", "cancel", "--json").stdout)
    job_id = data["points"][0]["job_id"]
    assert job_id
    subprocess.run(["scancel", job_id], check=True)
    data = wait_final(tmp_path, "cancel", timeout=60)
    assert data["counts"] == {"CANCELLED": 1}


def test_studyctl_dying_after_sbatch_is_recovered(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, "crash", "matrix: {zero_stage: [1, 3], nodes: [1, 2], ranks_per_node: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 3, setup: ['sleep 6']}\n")
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    # As if studyctl had died between sbatch and the ledger write: no job ids recorded.
    db = sqlite3.connect(tmp_path / "results" / "crash" / "ledger.sqlite")
    with db:
        submitted = dict(db.execute("SELECT point_id, job_id FROM attempts"))
        db.execute("UPDATE attempts SET job_id = NULL, array_index = NULL, state = 'SUBMITTED'")
    db.close()
    data = json.loads(cli(tmp_path, "sweep", "status", "crash", "--json").stdout)
    assert {p["point_id"]: p["job_id"] for p in data["points"]} == submitted  # found again by job name
    data = wait_final(tmp_path, "crash")
    assert data["counts"] == {"COMPLETED": 4}, f"{not_completed(data)}{diag(tmp_path, 'crash')}"


def test_status_says_when_accounting_cannot_be_read(tmp_path: Path) -> None:
    """sacct failing (slurmdbd unreachable) is shown with the states, not swallowed."""
    sweep = sweep_file(tmp_path, "noacct", "matrix: {zero_stage: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 3, setup: ['sleep 60']}\n")
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    conf = tmp_path / "etc-slurm"
    shutil.copytree(Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent, conf)
    text = (conf / "slurm.conf").read_text()
    (conf / "slurm.conf").write_text(re.sub(r"(?m)^AccountingStoragePort=\d+", "AccountingStoragePort=9", text))
    try:
        proc = subprocess.run([sys.executable, "-m", "studyctl.cli", "sweep", "status", "noacct", "--json",
                               "--results", str(tmp_path / "results")], capture_output=True, text=True,
                              env={**os.environ, "SLURM_CONF": str(conf / "slurm.conf")}, timeout=300)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["backend_note"].startswith("slurm: sacct failed")
        assert data["counts"] == {"SUBMITTED": 1} or data["counts"] == {"PENDING": 1}  # nothing guessed
        table = cli(tmp_path, "sweep", "status", "noacct")
        assert table.returncode == 0 and "stale" not in table.stdout  # with accounting back, no note
    finally:
        cli(tmp_path, "sweep", "cancel", "noacct")


def wait_job_running(tmp_path: Path, study: str, job_id: str) -> None:
    end = time.monotonic() + 60
    while job_state(job_id) != "RUNNING":
        assert time.monotonic() < end, "the job never started" + diag(tmp_path, study)
        time.sleep(1)


def requeue_now(job_id: str, used: set[str]) -> None:
    """What preemption in REQUEUE mode does, minus Slurm's 120 s hold before the job may start again.

    The hold exists because a node refuses a job whose credential it just revoked ("Job credential
    revoked"): the rerun is steered to nodes the job has not used (`used` collects them)."""
    nodes = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%N"], capture_output=True, text=True).stdout.strip()
    used |= set(subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True,
                               check=True).stdout.split())
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    end = time.monotonic() + 60
    while job_state(job_id) != "PENDING":  # the requeue is done once the job is pending
        assert time.monotonic() < end, "the requeued job never came back as pending"
        time.sleep(0.5)
    subprocess.run(["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(sorted(used))}",
                    "StartTime=now"], check=True)


def states_until_final(tmp_path: Path, study: str, timeout: float = 180) -> tuple[set[str], dict]:
    seen: set[str] = set()
    end = time.monotonic() + timeout
    while True:
        data = json.loads(cli(tmp_path, "sweep", "status", study, "--json").stdout)
        seen.add(data["points"][0]["state"])
        if seen & {s.value for s in FINAL_STATES}:
            return seen, data
        assert time.monotonic() < end, f"not final: {data['points']}" + diag(tmp_path, study)
        time.sleep(2)


def test_requeued_job_is_the_same_attempt_and_completes(tmp_path: Path) -> None:
    """Preemption with requeue (`scontrol requeue`): Slurm reruns the job; studyctl keeps one attempt,
    never calls it failed, and records the completion."""
    sweep = sweep_file(tmp_path, "requeue", "matrix: {zero_stage: 1, nodes: 2, ranks_per_node: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 5, setup: ['sleep 8']}\n")
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    job_id = json.loads(cli(tmp_path, "sweep", "status", "requeue", "--json").stdout)["points"][0]["job_id"]
    wait_job_running(tmp_path, "requeue", job_id)
    requeue_now(job_id, set())
    seen, data = states_until_final(tmp_path, "requeue")
    assert seen <= {"SUBMITTED", "PENDING", "RUNNING", "COMPLETED"} and "COMPLETED" in seen, data["points"]
    (point,) = data["points"]
    assert point["attempts"] == 1 and point["job_id"] == job_id
    history = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j", job_id], capture_output=True,
                             text=True).stdout.split()
    assert history[0] == "REQUEUED" and history[-1] == "COMPLETED"


def test_requeues_beyond_the_budget_end_as_preempted(tmp_path: Path) -> None:
    """slurm.max_requeues: 1 — the second requeue makes studyctl cancel the job and call it PREEMPTED."""
    sweep = sweep_file(tmp_path, "preempt", "matrix: {zero_stage: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 5, max_requeues: 1, setup: ['sleep 60']}\n")
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    job_id = json.loads(cli(tmp_path, "sweep", "status", "preempt", "--json").stdout)["points"][0]["job_id"]
    used: set[str] = set()
    for _ in range(2):
        wait_job_running(tmp_path, "preempt", job_id)
        requeue_now(job_id, used)
    seen, data = states_until_final(tmp_path, "preempt", timeout=60)
    assert seen <= {"SUBMITTED", "PENDING", "RUNNING", "PREEMPTED"}, seen
    (point,) = data["points"]
    assert point["state"] == "PREEMPTED" and point["failure_class"] == "scheduler", point
    assert "requeued" in point["reason"] and "slurm.max_requeues = 1" in point["reason"]
    assert point["attempts"] == 1
    end = time.monotonic() + 30
    while job_state(job_id):
        assert time.monotonic() < end, "the over-budget job was not cancelled"
        time.sleep(1)


def test_time_limit_gives_timeout(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, "slow", "matrix: {zero_stage: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 1, setup: ['sleep 300']}\n")
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    data = wait_final(tmp_path, "slow", timeout=200)
    (point,) = data["points"]
    assert point["state"] == "TIMEOUT" and point["failure_class"] == "timeout"


def test_expand_job_ids() -> None:
    assert expand_job_ids("12_[3-5,7%2]") == ["12_3", "12_4", "12_5", "12_7"]
    assert expand_job_ids("12_4") == ["12_4"] and expand_job_ids("9") == ["9"]


def test_slurm_options_errors_name_the_key(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, "bad", "matrix: {zero_stage: 1}\nslurm: {partition: debug, time_limit: 5}\n")
    proc = subprocess.run([sys.executable, "-m", "studyctl.cli", "plan", str(sweep)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "slurm.time_limit" in proc.stderr and "did you mean 'time_limit_min'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_plan_checks_memory_against_the_nodes_real_memory(tmp_path: Path) -> None:
    # 2 ranks × a 4 GiB buffer per host cannot fit the local cluster's nodes (RealMemory 4000 MiB).
    sweep = sweep_file(tmp_path, "mem", "matrix: {zero_stage: 1, ranks_per_node: 2, buffer_mib: 4096}\n"
                       "slurm: {partition: debug}\n")
    proc = run_cli("plan", str(sweep), "--backend", "slurm", "--strict", subprocess_=True)
    assert proc.returncode == 1, proc.stderr
    assert "will not fit: memory: workers need" in proc.stderr and "(per host)" in proc.stderr
    assert "Slurm RealMemory of the smallest node of partition debug" in proc.stderr
