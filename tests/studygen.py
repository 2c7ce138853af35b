"""A study directory as `sweep submit` leaves it after a run, built without running anything: its sweep copy,
its ledger (every point, one attempt each for most) and each attempt's task.json on disk.

Used by the light-import tests and by benchmarks/status_speed.py, so neither starts MPI ranks or waits for
real points to run. The ledger and the files are written by the library's own code (Ledger, sync_points,
WorkerTask), so `sweep status` reads exactly what it reads after a real run.
"""

from __future__ import annotations

import time
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Update
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.states import FailureClass, State
from studyctl.study.ledger import Ledger
from studyctl.study.store import sync_points

POINTS_PER_REPETITION = 40  # 4 ZeRO stages × 2 I/O modes × 5 node counts


def sweep_text(name: str, points: int, data_dir: Path) -> str:
    if points % POINTS_PER_REPETITION:
        raise ValueError(f"points must be a multiple of {POINTS_PER_REPETITION}")
    return (f"study: {name}\nmodels: [gpt2-125m]\n"
            "matrix: {zero_stage: [0, 1, 2, 3], io_mode: [buffered, direct], nodes: [1, 2, 4, 8, 16]}\n"
            f"repetitions: {points // POINTS_PER_REPETITION}\n"
            f"filesystems: {{scratch: {{path: {data_dir}}}}}\n"
            "checkpoint: {scale: 0.001, writes: 1, reads: 1}\ncalibration: {enabled: false}\n")


def build_study(results: Path, points: int, name: str = "status-bench") -> StudyPaths:
    """A `points`-point study under `results`: 2% never run, 3% FAILED, the rest COMPLETED (local backend)."""
    paths = StudyPaths((results / name).resolve())
    paths.root.mkdir(parents=True)
    source = results / f"{name}.yaml"
    source.write_text(sweep_text(name, points, results / "data"))
    paths.sweep_copy.write_text(source.read_text())
    planned = expand(load_sweep(source))
    never_run = len(planned) // 50
    failed = len(planned) * 3 // 100
    now = time.time()
    with Ledger(paths.ledger) as ledger:
        ledger.set_meta(source_path=str(source.resolve()), study=name, backend="local")
        sync_points(ledger, planned)
        ran = planned[never_run:]
        ledger.new_attempts([(pp.point.point_id, "local") for pp in ran])
        updates = []
        for i, pp in enumerate(ran):
            pid = pp.point.point_id
            files = paths.attempt(pid, 1)
            files.dir.mkdir(parents=True)
            files.task.write_text(WorkerTask(study=name, point_id=pid, point=pp.point, filesystem_path=str(results),
                                             result_path=str(files.result), error_path=str(files.error)
                                             ).model_dump_json())
            if i < failed:
                updates.append(Update(pid, 1, State.FAILED, FailureClass.IO_ERROR, "EIO on write", 1, "node1",
                                      now, now))
            else:
                updates.append(Update(pid, 1, State.COMPLETED, node_list="node1", started_at=now, ended_at=now))
        ledger.record_updates(updates, {(u.point_id, 1): str(paths.attempt(u.point_id, 1).result)
                                        for u in updates if u.state is State.COMPLETED})
    return paths
