"""The Slurm backend through its own API (launch / poll / cancel / recover) against the real local cluster.

Every srun task runs `probe` below: a real MPI allreduce across the job's ranks, then rank 0 writes a
result.json the way the worker does. The point's `filesystem` field picks the probe's behaviour
("ok", "fail", "sleep"), so one launch call can mix outcomes. The one slow time-limit test of the
suite is in test_slurm.py (through the CLI); here the time-limit mapping is checked on real submitit
records without waiting for a kill.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from studyctl.attempt.outcome import read_outcome
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Active, Handle, Launch, Update
from studyctl.backends.slurm import (
    SlurmBackend,
    array_ids,
    cluster_max_array_size,
    final_update,
    find_jobs,
    sbatch_message,
    shape_of,
    time_limit_min,
)
from studyctl.backends.slurm.sacct import SacctRow, SacctWatcher, expand_job_ids, parse_sacct
from studyctl.backends.slurm.verdict import submitit_error
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.options import SlurmOptions
from studyctl.fsutil import atomic_write_json
from studyctl.states import FINAL_STATES, FailureClass, State
from tests.slurm.slurmdiag import diagnose

REPO = Path(__file__).resolve().parents[2]
OPTIONS = SlurmOptions(partition="debug", time_limit_min=2, array_parallelism=8)


# ------------------------------------------------------------------ what every srun task runs
def probe(task_path: str) -> dict:
    """A real MPI job: allgather node names, allreduce ranks; rank 0 records them like the worker."""
    from mpi4py import MPI

    task = WorkerTask.model_validate_json(Path(task_path).read_text())
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    nodes = comm.allgather(os.environ.get("SLURMD_NODENAME", "?"))
    rank_sum = comm.allreduce(rank)
    mode = task.point.filesystem
    if mode == "fail":
        raise ValueError(f"intentional failure of point {task.point_id}")
    if mode == "sleep":
        time.sleep(600)
    env = os.environ
    job = (f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}" if env.get("SLURM_ARRAY_JOB_ID")
           else env.get("SLURM_JOB_ID"))
    if rank == 0:
        atomic_write_json(Path(task.result_path), {
            "point_id": task.point_id, "world_size": size, "rank_sum": rank_sum, "job_id": job,
            "provenance": {"node_names": sorted(set(nodes))}})
    return {"rank": rank, "size": size}


# ------------------------------------------------------------------ helpers
@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """The local cluster must be up: these tests never skip."""
    ping = ""
    if shutil.which("scontrol"):
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout
    if "UP" not in ping:
        pytest.fail("the local Slurm cluster is not up: "
                    "run `bash scripts/slurm-local-cluster.sh up` (as root)")
    sacct = subprocess.run(["sacct", "-X", "-n", "-j", "1"], capture_output=True, text=True)
    if sacct.returncode != 0:
        pytest.fail(f"sacct does not work (is slurmdbd up?): {sacct.stderr.strip()}")
    # the jobs unpickle `probe` by reference: make this checkout importable wherever they start
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old) if p)
    yield
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def make_launch(root: Path, study: str, nodes: int, per_node: int, mode: str = "ok", rep: int = 0) -> Launch:
    tiny = CheckpointOptions(scale=0.001, writes=1, reads=1)
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=nodes, ranks_per_node=per_node,
                  filesystem=mode, repetition=rep, checkpoint=tiny)
    files = StudyPaths(root).attempt(point.point_id, 1)
    files.dir.mkdir(parents=True)
    task = WorkerTask(study=study, point_id=point.point_id, point=point, filesystem_path=str(root / "fs"),
                      result_path=str(files.result), error_path=str(files.error))
    files.task.write_text(task.model_dump_json())
    return Launch(study, point.point_id, 1, point, files, None)


@dataclass
class Ledger:
    """What the study layer would record from the backend's callbacks."""

    handles: dict[str, Handle] = field(default_factory=dict)
    updates: dict[str, list[Update]] = field(default_factory=dict)

    def handle(self, launch: Launch, handle: Handle) -> None:
        self.handles[launch.point_id] = handle

    def update(self, update: Update) -> None:
        self.updates.setdefault(update.point_id, []).append(update)

    def last(self, point_id: str) -> Update | None:
        return (self.updates.get(point_id) or [None])[-1]


def wait_final(backend: SlurmBackend, launches: list[Launch], ledger: Ledger, timeout: float = 150) -> None:
    """Like the study layer: result files first, then one backend poll for the rest, until all are final."""
    end = time.monotonic() + timeout
    while True:
        open_ = [la for la in launches if not ((u := ledger.last(la.point_id)) and u.state in FINAL_STATES)]
        if not open_:
            return
        active = []
        for la in open_:
            outcome = read_outcome(la.paths, la.point_id, la.attempt)
            if outcome is not None and outcome.state is State.COMPLETED:
                ledger.update(outcome)
            elif la.point_id in ledger.handles:
                active.append(Active(la, ledger.handles[la.point_id]))
        for u in backend.poll(active):
            ledger.update(u)
        states = {f"{la.point.nodes}x{la.point.ranks_per_node} {la.point.filesystem} {la.point_id[:6]}":
                  (u := ledger.last(la.point_id)) and f"{u.state.value} {u.reason or ''}" for la in open_}
        assert time.monotonic() < end, f"not final after {timeout} s: {states}" + diagnose(backend.folder)
        time.sleep(1.0)


def hostnames(node_list: str) -> list[str]:
    return subprocess.run(["scontrol", "show", "hostnames", node_list], capture_output=True, text=True,
                          check=True).stdout.split()


# ------------------------------------------------------------------ one mixed launch call, several checks
@dataclass
class MixedRun:
    backend: SlurmBackend
    launches: dict[str, Launch]  # by label
    ledger: Ledger
    launch_s: float
    sacct_rows: dict[str, SacctRow]


@pytest.fixture(scope="module")
def mixed(cluster: None, tmp_path_factory: pytest.TempPathFactory) -> MixedRun:
    """1×2, 2×1, 2×2 (twice: an array), 4×1, a 5-node point Slurm must reject, and a failing function."""
    root = tmp_path_factory.mktemp("mixed")
    study = f"mixed-{uuid.uuid4().hex[:6]}"
    spec = {"1x2": (1, 2, "ok", 0), "2x1": (2, 1, "ok", 0), "2x2a": (2, 2, "ok", 0), "2x2b": (2, 2, "ok", 1),
            "4x1": (4, 1, "ok", 0), "5x1": (5, 1, "ok", 0), "fail": (1, 1, "fail", 0)}
    launches = {k: make_launch(root, study, n, t, mode, rep) for k, (n, t, mode, rep) in spec.items()}
    backend = SlurmBackend(OPTIONS, root / "slurm", entry=probe)
    ledger = Ledger()
    t0 = time.monotonic()
    backend.launch(list(launches.values()), ledger.handle, ledger.update)
    launch_s = time.monotonic() - t0
    wait_final(backend, list(launches.values()), ledger)
    ids = [h.job_id for h in ledger.handles.values() if h.job_id]
    end = time.monotonic() + 30
    while True:  # slurmdbd lags the result files by seconds; its first record is a placeholder ("allocation")
        rows = backend.watcher.rows(ids)
        settled = [j for j in ids if j in rows and rows[j].state in FINAL_STATES and rows[j].end
                   and rows[j].node_list and rows[j].name.startswith("studyctl-")]
        if len(settled) == len(ids) or time.monotonic() > end:
            break
        time.sleep(1)
    return MixedRun(backend, launches, ledger, launch_s, rows)


@pytest.mark.slurm
def test_launch_returns_after_sbatch_with_handles(mixed: MixedRun) -> None:
    assert mixed.launch_s < 30, "launch must return once sbatch has"
    # 5 shapes that Slurm accepts (2x2 twice is one array) and the rejected 5-node one: 6 sbatch calls
    assert mixed.backend.sbatch_calls == 6
    assert set(mixed.ledger.handles) == {la.point_id for k, la in mixed.launches.items() if k != "5x1"}
    a, b = (mixed.ledger.handles[mixed.launches[k].point_id] for k in ("2x2a", "2x2b"))
    assert a.job_id.split("_")[0] == b.job_id.split("_")[0] and {a.array_index, b.array_index} == {0, 1}
    single = mixed.ledger.handles[mixed.launches["4x1"].point_id]
    assert single.job_id.isdigit() and single.array_index is None  # a one-point group is a plain job


@pytest.mark.slurm
@pytest.mark.parametrize("label", ["1x2", "2x1", "2x2a", "2x2b", "4x1"])
def test_mpi_jobs_complete_on_the_right_nodes(mixed: MixedRun, label: str) -> None:
    launch = mixed.launches[label]
    point = launch.point
    assert mixed.ledger.last(launch.point_id).state is State.COMPLETED
    result = json.loads(launch.paths.result.read_text())
    size = point.nodes * point.ranks_per_node
    assert result["world_size"] == size, "srun --mpi=pmi2 must give one MPI world, not singletons"
    assert result["rank_sum"] == size * (size - 1) // 2
    assert len(result["provenance"]["node_names"]) == point.nodes
    handle = mixed.ledger.handles[launch.point_id]
    assert result["job_id"] == handle.job_id
    row = mixed.sacct_rows[handle.job_id]
    assert row.state is State.COMPLETED and row.exit_code == 0
    assert sorted(hostnames(row.node_list)) == result["provenance"]["node_names"]
    assert row.start and row.end and row.end >= row.start


@pytest.mark.slurm
def test_too_many_nodes_fails_with_slurms_message(mixed: MixedRun) -> None:
    launch = mixed.launches["5x1"]
    (update,) = mixed.ledger.updates[launch.point_id]  # recorded at submit time, never a handle
    assert update.state is State.FAILED and update.failure_class is FailureClass.SCHEDULER
    assert "Node count specification invalid" in update.reason and "\n" not in update.reason
    assert mixed.ledger.last(mixed.launches["4x1"].point_id).state is State.COMPLETED  # the others ran


@pytest.mark.slurm
def test_failing_function_is_failed_with_its_reason(mixed: MixedRun) -> None:
    launch = mixed.launches["fail"]
    update = mixed.ledger.last(launch.point_id)
    assert update.state is State.FAILED and update.failure_class is FailureClass.WORKER_CRASH
    assert f"ValueError: intentional failure of point {launch.point_id}" in update.reason
    assert update.exit_code == 1 and update.node_list


@pytest.mark.slurm
def test_sacct_is_one_batched_call_per_refresh(mixed: MixedRun) -> None:
    watcher = SacctWatcher()
    active = [Active(la, mixed.ledger.handles[la.point_id]) for la in mixed.launches.values()
              if la.point_id in mixed.ledger.handles]
    mixed.backend.watcher = watcher
    for _ in range(5):
        mixed.backend.poll(active)
    assert watcher.calls == 1  # cached for 2 s
    time.sleep(2.1)
    updates = mixed.backend.poll(active)
    assert watcher.calls == 2 and len(updates) == len(active)


@pytest.mark.slurm
def test_bad_partition_fails_every_launch_of_the_group(cluster: None, tmp_path: Path) -> None:
    launches = [make_launch(tmp_path, "badpart", 1, 1, rep=i) for i in range(3)]
    backend = SlurmBackend(SlurmOptions(partition="no-such-partition", time_limit_min=1), tmp_path / "slurm",
                           entry=probe)
    ledger = Ledger()
    backend.launch(launches, ledger.handle, ledger.update)
    assert not ledger.handles and backend.sbatch_calls == 1
    (reason,) = {ledger.last(la.point_id).reason for la in launches}
    assert reason.startswith("Slurm rejected the job: ") and "Invalid partition name specified" in reason
    assert all(ledger.last(la.point_id).failure_class is FailureClass.SCHEDULER for la in launches)


# ------------------------------------------------------------------ sbatch calls = shapes, arrays split
@pytest.mark.slurm
def test_sbatch_calls_equal_shapes_not_points(cluster: None, tmp_path: Path) -> None:
    """Held (`--hold`) so nothing runs: 1,000 points of 2 shapes are 2 arrays; MaxArraySize 5 splits 12."""
    study = f"shapes-{uuid.uuid4().hex[:6]}"
    launches = ([make_launch(tmp_path, study, 1, 1, rep=i) for i in range(700)]
                + [make_launch(tmp_path, study, 2, 1, rep=i) for i in range(300)])
    assert len({shape_of(OPTIONS, la) for la in launches}) == 2
    assert cluster_max_array_size() == 1001  # read from `scontrol show config`
    submitted: list[str] = []
    try:
        held = OPTIONS.model_copy(update={"sbatch_extra": ["--hold"], "array_parallelism": 3})
        backend = SlurmBackend(held, tmp_path / "slurm", entry=probe)
        ledger = Ledger()
        backend.launch(launches, ledger.handle, ledger.update)
        arrays = array_ids(list(ledger.handles.values()))
        submitted += arrays
        assert backend.sbatch_calls == 2 and len(arrays) == 2 and len(ledger.handles) == 1000
        indices = sorted(h.array_index for h in ledger.handles.values())
        assert indices == sorted(list(range(700)) + list(range(300)))
        shown = subprocess.run(["scontrol", "show", "job", arrays[0]], capture_output=True, text=True).stdout
        assert "ArrayTaskThrottle=3" in shown and "studyctl-" + study in shown and "JobState=PENDING" in shown
        script = next((tmp_path / "slurm").rglob("*_submission.sh")).read_text()
        assert "--mpi=pmi2" in script and "#SBATCH --hold" in script and "#SBATCH --requeue" in script
        assert f"#SBATCH --comment='studyctl study={study} manifest=" in script

        small = SlurmBackend(held.model_copy(update={"max_array_size": 5}), tmp_path / "slurm2", entry=probe)
        ledger2 = Ledger()
        small.launch(launches[:8] + launches[-4:], ledger2.handle, ledger2.update)
        arrays2 = array_ids(list(ledger2.handles.values()))
        submitted += arrays2
        assert small.sbatch_calls == len(arrays2) == 3  # 8 → 5 + 3, and 4
        assert max(h.array_index for h in ledger2.handles.values()) == 4
    finally:
        if submitted:
            subprocess.run(["scancel", *submitted], check=False)


# ------------------------------------------------------------------ cancel
@pytest.mark.slurm
def test_cancel_running_and_pending_array_elements(cluster: None, tmp_path: Path) -> None:
    study = f"cancel-{uuid.uuid4().hex[:6]}"
    launches = [make_launch(tmp_path, study, 1, 1, mode="sleep", rep=i) for i in range(2)]
    one_at_a_time = OPTIONS.model_copy(update={"array_parallelism": 1})
    backend = SlurmBackend(one_at_a_time, tmp_path / "slurm", entry=probe)
    ledger = Ledger()
    backend.launch(launches, ledger.handle, ledger.update)
    active = [Active(la, ledger.handles[la.point_id]) for la in launches]
    try:
        end = time.monotonic() + 120
        while True:  # element 0 running, element 1 held back by %1
            states = {u.point_id: u.state for u in backend.poll(active)}
            if states.get(launches[0].point_id) is State.RUNNING:
                break
            assert time.monotonic() < end, states
            time.sleep(1)
        assert states.get(launches[1].point_id) is State.PENDING
    finally:
        backend.cancel(active)
    wait_final(backend, launches, ledger, timeout=60)
    for la in launches:
        update = ledger.last(la.point_id)
        assert update.state is State.CANCELLED and update.failure_class is FailureClass.CANCELLED, update


# ------------------------------------------------------------------ crash between sbatch and the ledger
@pytest.mark.slurm
def test_jobs_found_by_name_after_a_crash(cluster: None, tmp_path: Path) -> None:
    study = f"crash-{uuid.uuid4().hex[:6]}"
    pair = [make_launch(tmp_path, study, 1, 1, rep=i) for i in range(2)]
    lone = make_launch(tmp_path, study, 2, 1)
    never = make_launch(tmp_path, study, 4, 1)
    backend = SlurmBackend(OPTIONS, tmp_path / "slurm", entry=probe)

    def die(launch: Launch, handle: Handle) -> None:
        raise KeyboardInterrupt("studyctl killed right after sbatch")

    with pytest.raises(KeyboardInterrupt):  # the pair's array is submitted, the 4-node group never is
        backend.launch([*pair, never], die, lambda u: None)
    backend.launch([lone], lambda la, h: None, lambda u: None)  # submitted, handle lost

    # a fresh studyctl, and a study whose name extends this one's: neither confuses the search
    SlurmBackend(OPTIONS, tmp_path / "other", entry=probe).launch(
        [make_launch(tmp_path / "o", f"{study}-b", 1, 1)], lambda la, h: None, lambda u: None)
    fresh = SlurmBackend(OPTIONS, tmp_path / "slurm", entry=probe)
    lost = [Active(la, Handle()) for la in [*pair, lone, never]]
    found = {a.launch.point_id: h for a, h in fresh.recover(lost)}  # at once, jobs queued
    assert set(found) == {la.point_id for la in [*pair, lone]}  # `never` never reached Slurm
    assert {found[la.point_id].array_index for la in pair} == {0, 1}
    assert found[lone.point_id].array_index is None
    ids = {h.job_id for h in found.values()}
    assert {j.job_id for j in find_jobs(study)} == ids

    end = time.monotonic() + 90
    while not all(la.paths.result.exists() for la in [*pair, lone]):
        assert time.monotonic() < end, "jobs did not finish"
        time.sleep(1)
    for la in [*pair, lone]:
        assert json.loads(la.paths.result.read_text())["job_id"] == found[la.point_id].job_id
    assert {j.job_id for j in find_jobs(study, ["squeue"])} == ids  # ended: slurmctld still knows them
    end = time.monotonic() + 60
    while {j.job_id for j in find_jobs(study, ["sacct"])} != ids:  # accounting alone, once names settle
        assert time.monotonic() < end, find_jobs(study, ["sacct"])
        time.sleep(1)
    assert {a.launch.point_id: h for a, h in fresh.recover(lost)} == found


# ------------------------------------------------------------------ no cluster needed
def _row(state: str, end: float | None = None, **kw: object) -> SacctRow:
    return SacctRow(job_id="7_1", name="studyctl-s-0123abcd", slurm_state=state.split()[0], state_text=state,
                    exit_code=kw.get("exit_code", 0), node_list="n[1-2]", start=1.0, end=end or 2.0,
                    reason=None)


def test_time_limit_kill_is_timeout_whichever_way_it_shows(tmp_path: Path) -> None:
    launch = make_launch(tmp_path, "t", 2, 1)
    usr2 = ("Traceback (most recent call last):\n  ...\nsubmitit.core.utils.UncompletedJobError: "
            "Job not requeued because: timed-out and not checkpointable.")
    slurmstepd = "slurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2026-11-22T18:59:14 DUE TO TIME LIMIT"
    for row, error, log in [(_row("FAILED", exit_code=1), usr2, ""), (_row("TIMEOUT"), None, ""),
                            (_row("CANCELLED"), None, slurmstepd)]:
        update = final_update(launch, row, error, log)
        assert update.state is State.TIMEOUT and update.failure_class is FailureClass.TIMEOUT, row
        assert "time limit" in update.reason


def test_submitit_result_pickle_gives_the_reason(tmp_path: Path) -> None:
    from submitit.core.utils import cloudpickle_dump

    launch = make_launch(tmp_path, "t", 1, 1)
    (tmp_path / "slurm" / "7_1").mkdir(parents=True)
    cloudpickle_dump(("error", "Traceback (most recent call last):\n  File x\nOSError: [Errno 5] EIO"),
                     tmp_path / "slurm" / "7_1" / "7_1_0_result.pkl")
    update = final_update(launch, _row("FAILED", exit_code=1), submitit_error(tmp_path / "slurm" / "7_1", "7_1"), "")
    assert update.state is State.FAILED and update.failure_class is FailureClass.WORKER_CRASH
    assert update.reason.startswith("OSError: [Errno 5] EIO (job 7_1 on n[1-2]; Slurm: FAILED exit 1)")
    stderr_only = final_update(launch, _row("FAILED", exit_code=1), None, "srun: error: n1: task 0: Exited\n")
    assert "srun: error: n1: task 0: Exited" in stderr_only.reason


def test_completed_without_result_waits_then_fails(tmp_path: Path) -> None:
    launch = make_launch(tmp_path, "t", 1, 1)
    assert final_update(launch, _row("COMPLETED", end=time.time()), None, "") is None  # NFS may lag
    late = final_update(launch, _row("COMPLETED", end=time.time() - 120), None, "")
    assert late.state is State.FAILED and "no result.json" in late.reason
    for state, ours in [("CANCELLED by 0", State.CANCELLED), ("NODE_FAIL", State.NODE_FAIL),
                        ("PREEMPTED", State.PREEMPTED), ("OUT_OF_MEMORY", State.OUT_OF_MEMORY)]:
        assert final_update(launch, _row(state), None, "").state is ours


def test_sacct_parsing() -> None:
    text = ("12_0|studyctl-s-0123abcd|COMPLETED|0:0|n[1-2]|1795373869|1795373871|None\n"
            "12_[1-3%2]|studyctl-s-0123abcd|PENDING|0:0|None assigned|Unknown|Unknown|JobArrayTaskLimit\n"
            "13|studyctl-s-4567abcd|CANCELLED by 0|0:15|n1|2026-11-22T18:58:02|2026-11-22T18:58:09|None\n")
    rows = parse_sacct(text)
    assert sorted(rows) == ["12_0", "12_1", "12_2", "12_3", "13"]
    assert rows["12_0"].state is State.COMPLETED and rows["12_0"].start == 1795373869.0
    assert rows["12_2"].state is State.PENDING and rows["12_2"].node_list is None
    assert rows["12_2"].reason == "JobArrayTaskLimit" and rows["12_2"].start is None
    assert rows["13"].state is State.CANCELLED and rows["13"].state_text == "CANCELLED by 0"
    assert rows["13"].end - rows["13"].start == 7
    assert expand_job_ids("12_[3-5,7%2]") == ["12_3", "12_4", "12_5", "12_7"]
    # slurmdbd lag: the array's pending rest may still list an element that already runs, either order
    running = "14_0|n|RUNNING|0:0|n1|5|Unknown|None"
    rest = "14_[0-1%1]|n|PENDING|0:0|None assigned|Unknown|Unknown|JobArrayTaskLimit"
    for lines in ([running, rest], [rest, running]):
        rows = parse_sacct("\n".join(lines))
        assert rows["14_0"].state is State.RUNNING and rows["14_1"].state is State.PENDING
        assert rows["14_0"].requeues == 0
    # sacct -D: a requeued job has a line per run, oldest first; the last one is its state
    history = ["15|n|REQUEUED|0:0|n1|5|6|None", "15|n|REQUEUED|0:0|n2|7|8|None", "15|n|RUNNING|0:0|n3|9|Unknown|None"]
    row = parse_sacct("\n".join(history))["15"]
    assert row.state is State.RUNNING and row.node_list == "n3" and row.requeues == 2


def test_sacct_watcher_batches_and_caches() -> None:
    calls: list[list[str]] = []

    def runner(cmd: list[str], **kw: object) -> subprocess.CompletedProcess:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "12_0|n|RUNNING|0:0|n1|1|Unknown|None\n", "")

    watcher = SacctWatcher(min_interval_s=60, runner=runner)
    assert watcher.rows(["12_0", "12_1", "9"])["12_0"].state is State.RUNNING
    watcher.rows(["12_1"])
    assert len(calls) == 1 and calls[0][-1] == "9,12"  # one call, whole arrays
    watcher.rows(["14_0"])
    assert len(calls) == 2


def test_slurm_options() -> None:
    with pytest.raises(ValueError, match="time_limit"):
        SlurmOptions.model_validate({"time_limit": 5})
    with pytest.raises(ValueError, match=r"slurm\.mpi"):
        SlurmOptions(srun_args=["--mpi=pmix"])
    with pytest.raises(ValueError, match="--time is set by studyctl"):
        SlurmOptions(sbatch_extra=["--time=10"])
    extra = SlurmOptions(sbatch_extra=["--reservation=big", "--hold"]).sbatch_parameters()
    assert extra == {"reservation": "big", "hold": True}
    mail = SlurmOptions(sbatch_extra={"mail_type": "END", "x": False})
    assert mail.sbatch_parameters() == {"mail-type": "END"}
    with pytest.raises(ValueError):
        SlurmOptions(mpi="pmi2 --oops")


def test_time_limits_and_shapes(tmp_path: Path) -> None:
    small = make_launch(tmp_path, "t", 1, 1)
    derived = SlurmOptions()
    assert time_limit_min(derived, small) == derived.min_time_limit_min  # tiny point: the floor
    assert time_limit_min(SlurmOptions(time_limit_min=7), small) == 7
    own = Launch(small.study, small.point_id, 1, small.point, small.paths, 150)
    assert time_limit_min(derived, own) == 3
    full = CheckpointOptions(scale=1.0, writes=10, reads=10)
    big_point = small.point.model_copy(update={"checkpoint": full})
    big = Launch("t", big_point.point_id, 1, big_point, small.paths, None)
    slow = SlurmOptions(assumed_GiBps_per_node=0.001)
    assert time_limit_min(slow, big) % 5 == 0 and time_limit_min(slow, big) > time_limit_min(derived, big)
    assert shape_of(OPTIONS, small) == (1, 1, 2, False)
    said = "sbatch: error: Batch job submission failed: Node count specification invalid\n"
    assert sbatch_message(said) == "Batch job submission failed: Node count specification invalid"


def test_a_reused_job_id_is_lost_not_someone_elses_state(tmp_path: Path) -> None:
    def runner(cmd: list[str], **kw: object) -> subprocess.CompletedProcess:
        out = ("5_0|studyctl-other-0123abcd|COMPLETED|0:0|n1|1|2|None\n"
               "6|studyctl-t-4567abcd|RUNNING|0:0|n2|1|Unknown|None\n"
               "7|allocation|PENDING|0:0||Unknown|Unknown|None\n")  # slurmdbd's first record of a job
        return subprocess.CompletedProcess(cmd, 0, out, "")

    backend = SlurmBackend(OPTIONS, tmp_path / "slurm")
    backend.watcher = SacctWatcher(runner=runner)
    mine, other = make_launch(tmp_path, "t", 1, 1), make_launch(tmp_path, "t", 1, 1, rep=1)
    new = make_launch(tmp_path, "t", 1, 1, rep=2)
    polled = backend.poll([Active(mine, Handle("6")), Active(other, Handle("5_0", 0)),
                           Active(new, Handle("7"))])
    updates = {u.point_id: u for u in polled}
    assert updates[mine.point_id].state is State.RUNNING and updates[mine.point_id].node_list == "n2"
    lost = updates[other.point_id]
    assert lost.state is State.LOST and "studyctl-other" in lost.reason
    assert updates[new.point_id].state is State.PENDING


@pytest.mark.slurm
def test_a_job_id_slurm_forgot_is_lost_after_the_grace(mixed: MixedRun, tmp_path: Path) -> None:
    """Job ids neither squeue nor sacct know (a purged or rebuilt cluster) end as LOST, not active forever."""
    from studyctl.backends.slurm import VANISHED_AFTER_S

    study = mixed.launches["1x2"].study
    gone, done, fresh = (make_launch(tmp_path, study, 1, 1, rep=i) for i in (10, 11, 12))
    atomic_write_json(done.paths.result, {"point_id": done.point_id, "provenance": {}})
    long_ago = time.time() - VANISHED_AFTER_S - 60
    known = mixed.launches["4x1"]  # a real job of this study, long finished
    backend = SlurmBackend(OPTIONS, mixed.backend.folder)
    polled = backend.poll([Active(gone, Handle("987654"), long_ago), Active(done, Handle("987655"), long_ago),
                           Active(fresh, Handle("987656"), time.time()),
                           Active(known, mixed.ledger.handles[known.point_id], long_ago)])
    updates = {u.point_id: u for u in polled}
    assert updates[gone.point_id].state is State.LOST and "987654" in updates[gone.point_id].reason
    assert updates[gone.point_id].failure_class is FailureClass.LOST
    assert updates[done.point_id].state is State.COMPLETED  # its result file still wins
    assert fresh.point_id not in updates  # sacct may simply lag: no verdict yet
    assert updates[known.point_id].state is State.COMPLETED


@pytest.mark.slurm
def test_sbatch_retries_while_the_controller_restarts(cluster: None, tmp_path: Path) -> None:
    """slurmctld down at submit time (a restart, a failover): sbatch fails with 'Unable to contact slurm
    controller'; the backend retries with backoff instead of failing the points, and the job runs."""
    lab = Path(os.environ.get("SLURM_LAB_DIR", "/tmp/slurm-local"))
    pid = int((lab / "run" / "slurmctld.pid").read_text())
    os.kill(pid, signal.SIGTERM)  # slurmctld saves its state and exits; the restart picks it up
    end = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < end, "slurmctld did not stop"
        time.sleep(0.2)

    launch = make_launch(tmp_path, f"retry-{uuid.uuid4().hex[:6]}", 1, 1)
    backend = SlurmBackend(OPTIONS, tmp_path / "slurm", entry=probe)
    ledger = Ledger()

    def restart() -> None:
        give_up = time.monotonic() + 90
        while backend.sbatch_calls < 1 and time.monotonic() < give_up:  # the first sbatch has failed
            time.sleep(0.2)
        subprocess.run(["slurmctld"], check=True)

    restarter = threading.Thread(target=restart)
    restarter.start()
    try:
        backend.launch([launch], ledger.handle, ledger.update)
    finally:
        restarter.join()
        end = time.monotonic() + 60
        while "UP" not in subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout:
            assert time.monotonic() < end, "slurmctld did not come back"
            time.sleep(1)
    assert backend.sbatch_calls >= 2
    assert ledger.last(launch.point_id).state is State.PENDING, ledger.updates
    assert ledger.handles[launch.point_id].job_id
    wait_final(backend, [launch], ledger)
    assert ledger.last(launch.point_id).state is State.COMPLETED
