"""Local backend: each point is `mpiexec -n <nodes × ranks_per_node>` on this machine.

Nodes are simulated (rank groups on one host; the result says so). Every point runs in its own
session so a timeout ends the whole process group, and so a point survives a `kill -9` of
studyctl: the next command finds it by PID and waits for it instead of running it twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from studyctl.attempt.outcome import read_outcome, results_full, stderr_tail
from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.backends.base import Backend
from studyctl.backends.machine import Machine, misfit
from studyctl.definition.checkpoint.places import Place
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.checkpoint.recovery import before_restart_path
from studyctl.definition.inputs.options import LocalOptions
from studyctl.errors import UserError
from studyctl.removal import remove_place
from studyctl.states import FailureClass, State
from worker import provenance
from worker.nodes import dir_name

if TYPE_CHECKING:
    from studyctl.attempt.paths import StudyPaths
    from studyctl.definition.planning.plan import Capacity
    from studyctl.definition.planning.sweep import SweepFile

POLL_S = 0.1
KILL_GRACE_S = 5.0


def default_mpiexec() -> str:
    """The mpiexec of the MPI wheel installed beside this Python, else one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    if not found:
        raise UserError("no mpiexec found: install the 'mpich' wheel (pip install mpich) or set local.mpiexec", 1)
    return found


def resolve_mpiexec(options: LocalOptions) -> str:
    """The mpiexec to run: `local.mpiexec` (a path or a name on PATH) if it is an executable file, else the default.

    A UserError (exit 1) if none is; the local backend turns it into its points' failure reason."""
    if options.mpiexec is None:
        return default_mpiexec()
    found = shutil.which(options.mpiexec)
    if not found:
        raise UserError(f"local.mpiexec: {options.mpiexec!r} is not an executable file (missing, not executable, or "
                        "not on PATH)", 1)
    return found


def worker_command(launch: Launch, options: LocalOptions, mpiexec: str | None = None) -> list[str]:
    """mpiexec of the worker; a recovery point's two worlds one after the other (worker.relaunch)."""
    world = launch.point.world_size
    mpiexec = mpiexec or resolve_mpiexec(options)
    if launch.point.recovery is not None:
        return [sys.executable, "-m", "worker.relaunch", str(launch.paths.task), "mpiexec", mpiexec,
                *options.mpiexec_args]
    return [mpiexec, *options.mpiexec_args, "-n", str(world), sys.executable, "-m", "worker", str(launch.paths.task)]


def pid_runs_task(pid: int, task_file: Path) -> bool:
    """True if `pid` is alive and is the mpiexec we started for `task_file` (not a reused PID)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(task_file).encode() in cmdline


def task_processes(task_file: Path) -> list[int]:
    """Every process whose command line names `task_file`: our mpiexec, and the ranks its proxies start (each
    rank and proxy in a session of its own, so ending mpiexec's process group does not reach them)."""
    needles = {str(task_file).encode(), before_restart_path(str(task_file)).encode()}  # a recovery point's worlds
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needles.intersection((entry / "cmdline").read_bytes().split(b"\0")):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def find_task_process(task_file: Path) -> int | None:
    """The session leader (our mpiexec) whose command line names `task_file`, if one runs."""
    for pid in task_processes(task_file):
        with contextlib.suppress(OSError):
            if os.getsid(pid) == pid:
                return pid
    return None


def end_stragglers(task_file: Path) -> None:
    """After mpiexec is gone: ranks that outlive it (hung, or stopped: a stopped rank never acts on the SIGTERM
    mpiexec passed on) get the grace period to go, then SIGKILL, so their point's data can be removed now."""
    deadline = time.monotonic() + KILL_GRACE_S
    while (left := task_processes(task_file)) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_GRACE_S
    while task_processes(task_file) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def end_process_group(pid: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the point's process group and wait for it to go, as long as it needs up to a grace period;
    SIGKILL what is left then. `proc`: our own child, reaped as we wait (a zombie would look alive)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        if proc is not None:
            proc.wait()
        return
    deadline = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline:
        if proc is not None:
            proc.poll()
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    if proc is not None:
        proc.wait()


@dataclass
class _Running:
    launch: Launch
    proc: subprocess.Popen[bytes] | None  # None: adopted from an earlier studyctl
    pid: int
    started: float  # epoch seconds


class LocalBackend(Backend):
    """We are the scheduler: launch runs everything to the end and supervises runs it adopts."""

    name = "local"
    runs_to_completion: ClassVar[bool] = True
    initial_state: ClassVar[State] = State.PLANNED
    adopts: ClassVar[bool] = True
    runs_here: ClassVar[bool] = True
    time_limit_setting: ClassVar[str] = "local.timeout_s"

    def __init__(self, options: LocalOptions, machine: Machine | None = None) -> None:
        self.options = options
        self.machine = machine or Machine.this()

    def refuse(self, point: Point) -> str | None:
        """No mpiexec to start it with, or more ranks or buffer memory than this machine has (see machine.py)."""
        try:
            resolve_mpiexec(self.options)
        except UserError as exc:
            return str(exc)
        return misfit(point, self.machine, self.options.max_ranks_per_core)

    @classmethod
    def from_sweep(cls, sweep: SweepFile, paths: StudyPaths) -> LocalBackend:
        return cls(sweep.local)

    def time_limit_s(self, point: Point) -> int | None:
        return self.options.timeout_s

    @classmethod
    def point_time_limit_s(cls, sweep: SweepFile, point: Point) -> int | None:
        return sweep.local.timeout_s

    @classmethod
    def capacity(cls, sweep: SweepFile) -> Capacity:
        """Memory as `refuse` judges it (machine.misfit): this machine's available memory, for all the simulated
        nodes of a point at once."""
        return dataclasses.replace(super().capacity(sweep), host_memory_bytes=Machine.this().available_memory_bytes,
                                   host_memory_source="this machine's available memory", hosts_share_one_machine=True)

    def _start(self, launch: Launch, record_update: RecordUpdate) -> _Running | None:
        """Recorded RUNNING before the process exists: a kill -9 from here on leaves an active attempt, which
        the next command resolves (its process found by task file, or LOST) instead of starting it twice.
        The caller supervises the run at once, then records its PID. None: it could not start (recorded FAILED
        with why: mpiexec missing or not executable, the attempt directory unwritable)."""
        started = time.time()
        try:
            command = worker_command(launch, self.options)
        except UserError as exc:
            record_update(Update(launch.point_id, launch.attempt, State.FAILED, FailureClass.CONFIG, str(exc),
                                 started_at=started, ended_at=time.time()))
            return None
        record_update(Update(launch.point_id, launch.attempt, State.RUNNING, node_list="localhost",
                             started_at=started))
        paths = launch.paths
        try:
            paths.dir.mkdir(parents=True, exist_ok=True)
            with paths.stdout.open("wb") as out, paths.stderr.open("wb") as err:
                proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=paths.dir,
                                        start_new_session=True)
        except OSError as exc:
            failure = FailureClass.CONFIG if exc.filename == command[0] else FailureClass.IO_ERROR
            record_update(Update(launch.point_id, launch.attempt, State.FAILED, failure,
                                 f"cannot start {exc.filename or command[0]}: {exc.strerror or exc}",
                                 started_at=started, ended_at=time.time()))
            return None
        return _Running(launch, proc, proc.pid, started)

    def _finish(self, run: _Running, exit_code: int | None) -> Update:
        launch = run.launch
        ended = time.time()
        outcome = read_outcome(launch.paths, launch.point_id, launch.attempt)
        if outcome is not None and (outcome.state is not State.COMPLETED or exit_code in (0, None)):
            return Update(**{**outcome.__dict__, "exit_code": exit_code, "started_at": run.started,
                             "ended_at": ended})
        full = results_full(launch.paths, exit_code)
        if full is not None:
            return Update(launch.point_id, launch.attempt, State.FAILED, FailureClass.IO_ERROR, full, exit_code,
                          started_at=run.started, ended_at=ended)
        reason = stderr_tail(launch.paths) or f"worker exited with code {exit_code} and no error record"
        return Update(launch.point_id, launch.attempt, State.FAILED, FailureClass.WORKER_CRASH, reason,
                      exit_code, started_at=run.started, ended_at=ended)

    def _timeout(self, run: _Running) -> Update:
        end_process_group(run.pid, run.proc)
        end_stragglers(run.launch.paths.task)
        limit = run.launch.time_limit_s
        return Update(run.launch.point_id, run.launch.attempt, State.TIMEOUT, FailureClass.TIMEOUT,
                      f"exceeded the per-point timeout of {limit} s; its process group was ended",
                      started_at=run.started, ended_at=time.time())

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        """Run everything to the end, `max_concurrent` at a time.

        `adopted`: runs an earlier studyctl started that are still alive (`since`: their start); they are
        waited for and timed out like our own, counted from their start, and count against `max_concurrent`.
        """
        queue = list(launches)
        running = [_Running(a.launch, None, a.handle.pid, a.since or time.time()) for a in adopted if a.handle.pid]
        try:
            while queue or running:
                while queue and len(running) < self.options.max_concurrent:
                    run = self._start(queue.pop(0), record_update)
                    if run is not None:
                        running.append(run)
                        record_handle(run.launch, Handle(pid=run.pid))
                still = []
                for run in running:
                    update = self._check(run)
                    if update is None:
                        still.append(run)
                    else:
                        record_update(update)
                running = still
                if running:
                    time.sleep(POLL_S)
        except KeyboardInterrupt as stop:
            self._stop(running, record_update, getattr(stop, "reason", "interrupted by the user (Ctrl-C)"))
            raise

    def _stop(self, running: Sequence[_Running], record_update: RecordUpdate, reason: str) -> None:
        """Record every running attempt CANCELLED first (a second Ctrl-C cannot leave them RUNNING), then end
        their process groups; interrupted again, it kills what is left at once."""
        for run in running:
            record_update(Update(run.launch.point_id, run.launch.attempt, State.CANCELLED, FailureClass.CANCELLED,
                                 reason, started_at=run.started, ended_at=time.time()))
        try:
            for run in running:
                end_process_group(run.pid, run.proc)
            for run in running:
                end_stragglers(run.launch.paths.task)
        except BaseException:
            for run in running:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.pid, signal.SIGKILL)
            raise

    def _check(self, run: _Running) -> Update | None:
        limit = run.launch.time_limit_s
        if run.proc is not None:
            code = run.proc.poll()
            if code is not None:
                return self._finish(run, code)
        elif not pid_runs_task(run.pid, run.launch.paths.task):
            return self._finish(run, None)
        if limit and time.time() - run.started > limit:
            return self._timeout(run)
        return None

    def poll(self, active: Sequence[Active]) -> list[Update]:
        """Attempts whose process is gone: their files say how they ended, or they are LOST."""
        updates = []
        for a in active:
            launch = a.launch
            if a.handle.pid and pid_runs_task(a.handle.pid, launch.paths.task):
                continue
            outcome = read_outcome(launch.paths, launch.point_id, launch.attempt)
            updates.append(outcome or Update(
                launch.point_id, launch.attempt, State.LOST, FailureClass.LOST,
                "the worker process is gone and left no result (studyctl or the machine stopped mid-run)",
                ended_at=time.time()))
        return updates

    def still_running(self, attempts: Mapping[Path, Handle]) -> set[Path]:
        """Task files some process on this machine still names (mpiexec, or a rank in its own session; a recovery
        point's writing world names its copy of the task)."""
        wanted = {str(t).encode(): t for t in attempts}
        wanted.update({before_restart_path(str(t)).encode(): t for t in attempts})
        found: set[Path] = set()
        if not wanted:
            return found
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    args = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                found.update(wanted[a] for a in args if a in wanted)
        return found

    def remove_node_local(self, place: Place, point: Point, node_list: str | None,
                          completed: bool = False, job_id: str | None = None) -> bool:
        """Every simulated node is this machine: its tier (one per node where the path names "{node}") is here."""
        if not place.per_node:
            remove_place(place)
            return True
        for node in range(point.nodes):
            name, _ = provenance.node_name(node * point.ranks_per_node, point.ranks_per_node)
            remove_place(place.on_node(dir_name(name)))
        return True

    def recover(self, active: Sequence[Active]) -> list[tuple[Active, Handle]]:
        """Attempts recorded RUNNING whose PID a killed studyctl never recorded: their process, by task file."""
        found = []
        for a in active:
            if not a.handle.pid and (pid := find_task_process(a.launch.paths.task)) is not None:
                found.append((a, Handle(pid=pid)))
        return found

    def cancel(self, active: Sequence[Active]) -> None:
        """End the process group of each attempt still alive (found by task file if its PID was never recorded)."""
        for a in active:
            task = a.launch.paths.task
            pid = a.handle.pid if a.handle.pid and pid_runs_task(a.handle.pid, task) else find_task_process(task)
            if pid is not None:
                end_process_group(pid)
            end_stragglers(task)
