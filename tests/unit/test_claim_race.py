"""Two points of one study: one ends and removes the study's empty data directory while the other claims its own."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from worker.claim import _open_claim_file


def test_claim_survives_the_study_directory_vanishing(tmp_path: Path) -> None:
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=1, ranks_per_node=1, filesystem="fs",
                  io_mode="buffered", checkpoint=CheckpointOptions())
    task = WorkerTask(study="race", point_id=point.point_id, point=point, filesystem_path=str(tmp_path),
                      result_path=str(tmp_path / "r.json"), error_path=str(tmp_path / "e.json"))
    study_dir = task.claim_file.parent
    stop = threading.Event()
    removed = 0

    def other_points_ending() -> None:  # worker.claim.release of other points, one rmdir each, in quick succession
        nonlocal removed
        while not stop.is_set():
            with contextlib.suppress(OSError):
                study_dir.rmdir()
                removed += 1
            time.sleep(0.0002)

    remover = threading.Thread(target=other_points_ending)
    remover.start()
    try:
        deadline = time.monotonic() + 60
        while removed < 100 and time.monotonic() < deadline:  # until the directory vanished under us 100 times
            fd = _open_claim_file(task)
            os.close(fd)
            task.claim_file.unlink()
    finally:
        stop.set()
        remover.join()
    assert removed >= 100  # the race really happened under the claims
