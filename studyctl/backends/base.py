"""The backend protocol: nothing outside `backends/` knows which backend runs.

A study hands a backend `Launch`es; the backend reports a `Handle` for each as soon as it has
one (so the ledger records job ids before anything runs) and later `Update`s of state.
The worker's result file, not the backend, is the truth for success: the study layer checks
it first and asks the backend only about points without one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from studyctl.attempt.records import Active, Launch, RecordHandle, RecordUpdate, Update


class Backend(Protocol):
    name: str

    def launch(self, launches: Sequence[Launch], record_handle: RecordHandle,
               record_update: RecordUpdate) -> None:
        """Start the attempts. Call `record_handle` the moment each has a handle.

        Slurm returns once everything is submitted; local runs them to the end (with its own
        concurrency and timeouts) and reports every state change through `record_update`.
        """
        ...

    def poll(self, active: Sequence[Active]) -> list[Update]:
        """Current states of attempts that have no result file yet (one batched query)."""
        ...

    def cancel(self, active: Sequence[Active]) -> None:
        ...
