"""`cancel`: every queued or running attempt of a study, recorded CANCELLED first, then stopped."""

from __future__ import annotations

import time
from pathlib import Path

from studyctl.attempt.records import Active, Update
from studyctl.backends import base
from studyctl.definition.planning.sweep import load_sweep
from studyctl.states import FailureClass, State
from studyctl.study.cleanup import CLEANUP_WAIT_S, finish_cleanups
from studyctl.study.launches import existing_launch
from studyctl.study.lock import stop_runner
from studyctl.study.recorder import Recorder
from studyctl.study.repair import open_ledger
from studyctl.study.store import find_study

REASON = "cancelled by 'studyctl sweep cancel'"


def cancel(study_ref: str | Path, results: Path = Path("results")) -> int:
    """Cancel every queued or running attempt and stop the study's runner; returns how many attempts.

    Works from the study's own copy of the sweep: the original file may have been edited (or broken) since.
    """
    paths = find_study(study_ref, results)
    with open_ledger(paths, base.DEFAULT, []) as ledger:
        sweep = load_sweep(paths.sweep_copy)
        rows = ledger.active_attempts(queued=True)
        backends = {name: base.make(name, sweep, paths) for name in {r.backend for r in rows}}
        # Record first: a runner that sees its process die afterwards cannot turn this into FAILED,
        # and one that has yet to start a queued attempt finds it final.
        Recorder(paths, ledger, sweep).updates([
            Update(r.point_id, r.attempt, State.CANCELLED, FailureClass.CANCELLED, REASON, ended_at=time.time())
            for r in rows])
        stop_runner(paths)
        by_backend: dict[str, list[Active]] = {}
        for row in rows:
            launch = existing_launch(paths, row, backends[row.backend])
            if launch is not None:
                by_backend.setdefault(row.backend, []).append(Active(launch, row.handle, row.submitted_at))
        for name, actives in by_backend.items():
            backends[name].cancel(actives)
        # once their ranks are gone (they take a moment after the signal): a later command finishes the rest
        finish_cleanups(paths, ledger, sweep, backends.get, only={(r.point_id, r.attempt) for r in rows},
                        wait_s=CLEANUP_WAIT_S)
    return len(rows)
