"""`cancel`: every queued or running attempt of a study, recorded CANCELLED first, then stopped."""

from __future__ import annotations

import time
from pathlib import Path

from studyctl.attempt.records import Active, Update
from studyctl.backends import base
from studyctl.states import FailureClass, State
from studyctl.study.launches import existing_launch
from studyctl.study.ledger import Ledger
from studyctl.study.recorder import Recorder, cleanup_point_data
from studyctl.study.store import find_study, load_current_sweep

REASON = "cancelled by 'studyctl sweep cancel'"


def cancel(study_ref: str | Path, results: Path = Path("results")) -> int:
    """Cancel every queued or running attempt; returns how many."""
    paths = find_study(study_ref, results)
    with Ledger(paths.ledger) as ledger:
        sweep = load_current_sweep(paths, ledger)
        rows = ledger.active_attempts()
        by_backend: dict[str, list[Active]] = {}
        backends = {name: base.make(name, sweep, paths) for name in {r.backend for r in rows}}
        for row in rows:
            launch = existing_launch(paths, row, backends[row.backend])
            if launch is not None:
                by_backend.setdefault(row.backend, []).append(Active(launch, row.handle, row.submitted_at))
        # Record first: a runner that sees its process die afterwards cannot turn this into FAILED.
        Recorder(paths, ledger, None).updates([
            Update(r.point_id, r.attempt, State.CANCELLED, FailureClass.CANCELLED, REASON, ended_at=time.time())
            for r in rows])
        for name, actives in by_backend.items():
            backends[name].cancel(actives)
            for a in actives:
                cleanup_point_data(paths, sweep, Update(a.launch.point_id, a.launch.attempt, State.CANCELLED),
                                   a.launch.point)
    return len(rows)
