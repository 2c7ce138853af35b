"""The Backend class and its registry: nothing outside `backends/` knows which backend runs.

A study hands a backend `Launch`es; the backend reports a `Handle` for each as soon as it has
one (so the ledger records job ids before anything runs) and later `Update`s of state.
The worker's result file, not the backend, is the truth for success: the study layer checks
it first and asks the backend only about attempts without one.

What differs between backends is said by capabilities (class attributes and overridable
methods with defaults here), never by comparing names above this package.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from studyctl import host
from studyctl.attempt.records import Active, Handle, Launch, RecordHandle, RecordUpdate, Update
from studyctl.definition.checkpoint.places import Place
from studyctl.definition.checkpoint.points import Point
from studyctl.errors import UserError
from studyctl.states import State

if TYPE_CHECKING:
    from pathlib import Path

    from studyctl.attempt.paths import StudyPaths
    from studyctl.definition.planning.plan import Capacity
    from studyctl.definition.planning.sweep import SweepFile


class Backend(ABC):
    """Where attempts run. Subclasses set `name` and implement launch, poll and cancel."""

    name: ClassVar[str]
    # launch() returns only when every attempt has ended (local: we are the scheduler), or as soon as
    # everything is submitted (a batch scheduler runs them; `status --watch` follows them).
    runs_to_completion: ClassVar[bool] = False
    # The state a new attempt is recorded in before launch: PLANNED while it waits in our own queue
    # (a kill -9 leaves it PLANNED, to run later), SUBMITTED once it is handed to a scheduler.
    initial_state: ClassVar[State] = State.SUBMITTED
    # Attempts an earlier studyctl started and that still run are handed back to launch() to wait for
    # (and time out) alongside the new ones: we supervise them, no scheduler does.
    adopts: ClassVar[bool] = False
    # Attempts run on this machine: every path they write (node-local tiers too) is checked here before submit
    # starts anything, as the worker would; elsewhere only the shared paths this machine sees are.
    runs_here: ClassVar[bool] = False
    # The sweep setting behind `point_time_limit_s`, named when a point's estimate exceeds it.
    time_limit_setting: ClassVar[str] = "its time limit"

    @classmethod
    def from_sweep(cls, sweep: SweepFile, paths: StudyPaths) -> Backend:
        """This backend configured from the sweep's section for it and the study's folder (what `make` calls)."""
        raise NotImplementedError(f"{cls.__name__} is made by the factory it was registered with")

    @classmethod
    def launched_tasks(cls, paths: StudyPaths) -> set[str]:
        """Task files of attempts this backend's own records (kept in the study directory) say it launched:
        who owns an attempt when the ledger has lost it."""
        return set()

    @classmethod
    def capacity(cls, sweep: SweepFile) -> Capacity:
        """Free space of the sweep's filesystems as this machine sees them, and the memory of the hosts that will
        run the points (None: this backend cannot say). What `plan` and `submit` judge a sweep by."""
        from studyctl.definition.planning.plan import Capacity

        space = {name: host.free_space(fs.path) if fs.object_store is None else (None, "an object store: no free "
                 "space to read") for name, fs in sweep.filesystems.items()}
        return Capacity({name: free for name, (free, _) in space.items()},
                        {name: where for name, (_, where) in space.items()}, None,
                        f"the {cls.name} backend does not say")

    @classmethod
    def point_time_limit_s(cls, sweep: SweepFile, point: Point) -> int | None:
        """The limit a point of `sweep` will run under here, set or derived (None: none): `plan` warns and `submit`
        refuses when the point's estimate exceeds it."""
        return None

    def time_limit_s(self, point: Point) -> int | None:
        """The limit a launch of `point` carries; None lets the backend derive its own (or have none)."""
        return None

    def refuse(self, point: Point) -> str | None:
        """Why this backend cannot run `point` at all (more ranks or memory than its machine has, no launcher):
        checked before anything starts, and the attempt is FAILED (class config) with this reason. None: it can."""
        return None

    @abstractmethod
    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle, record_update: RecordUpdate,
               adopted: Sequence[Active] = ()) -> None:
        """Start the attempts. Call `record_handle` the moment each has a handle.

        `adopted` (only for backends that adopt): attempts an earlier studyctl started that are still alive,
        with `Active.since` their start; they are supervised like new ones and keep their time limit.
        """

    @abstractmethod
    def poll(self, active: Sequence[Active]) -> list[Update]:
        """Current states of attempts that have no result file yet (one batched query). Attempts still
        alive under a backend that adopts are left out: the caller adopts them."""

    @abstractmethod
    def cancel(self, active: Sequence[Active]) -> None:
        """Stop the attempts (the caller has recorded them CANCELLED already)."""

    def still_running(self, attempts: Mapping[Path, Handle]) -> set[Path]:
        """Of attempts recorded as ended (task file → handle), those some of whose processes still run (their
        data is not removed until they are gone). Default: a final state means its processes are gone."""
        return set()

    def remove_node_local(self, place: Place, point: Point, node_list: str | None,
                          completed: bool = False, job_id: str | None = None) -> bool:
        """Remove an ended attempt's node-local `place` (its tier) on every node it ran on, where that place
        is; True once done or handed to something that does it there. `completed`: the worker wrote its result,
        so it reached its own clean-up (only a kill in between leaves anything). Default: none to remove."""
        return True

    def recover(self, active: Sequence[Active]) -> list[tuple[Active, Handle]]:
        """Handles of attempts a studyctl launched but died before recording (found again by the backend)."""
        return []

    def note(self) -> str | None:
        """Why the states of the last poll may be stale (e.g. the scheduler's accounting failing)."""
        return None


Factory = Callable[["SweepFile", "StudyPaths"], Backend]
# The backend a command uses when none is named (`--backend`, `api.plan`, `submit`), and the one a study recorded
# before the ledger kept its backend ran on: chosen here once.
DEFAULT = "local"
# name → "module:attribute" of a Backend class, imported on first use (the local backend never imports
# submitit), or a class with the factory that makes it, registered at run time (tests' FakeBackend).
_REGISTRY: dict[str, str | tuple[type[Backend], Factory]] = {
    "local": "studyctl.backends.local:LocalBackend",
    "slurm": "studyctl.backends.slurm:SlurmBackend",
}


def register(name: str, cls: type[Backend], factory: Factory | None = None) -> None:
    """Make `name` a backend of class `cls`, built by `factory(sweep, study_paths)` (default `cls.from_sweep`)."""
    _REGISTRY[name] = (cls, factory or cls.from_sweep)


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def check_name(name: str) -> str:
    """`name` if it is a backend, else the one-line usage error that lists them."""
    if name not in _REGISTRY:
        raise UserError(f"--backend: {name!r} is not one of {', '.join(names())}")
    return name


def backend_class(name: str) -> type[Backend]:
    """The class of backend `name` (its capabilities, capacity and limits), without configuring one."""
    return _entry(name)[0]


def _entry(name: str) -> tuple[type[Backend], Factory]:
    entry = _REGISTRY[check_name(name)]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        cls: type[Backend] = getattr(importlib.import_module(module), attr)
        entry = _REGISTRY[name] = (cls, cls.from_sweep)
    return entry


def owners(paths: StudyPaths) -> dict[str, str]:
    """Task file → name of the backend whose own records say it launched that attempt."""
    found: dict[str, str] = {}
    for name in names():
        found.update(dict.fromkeys(_entry(name)[0].launched_tasks(paths), name))
    return found


def make(name: str, sweep: SweepFile, paths: StudyPaths) -> Backend:
    """The backend `name`, configured from the sweep's options for it and the study's folder."""
    return _entry(name)[1](sweep, paths)
