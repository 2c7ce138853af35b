"""Submission at scale: sbatch calls for a 500-point study equal its resource shapes, not its points.

Submitted held (`--hold`) to the local Slurm cluster and cancelled afterwards, so nothing runs.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Launch
from studyctl.backends.slurm import SlurmBackend, shape_of
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.options import SlurmOptions


def main(points: int = 500) -> int:
    options = SlurmOptions(partition="debug", time_limit_min=5, sbatch_extra={"hold": True}, max_array_size=1000)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        launches = []
        for i in range(points):
            point = Point(model=lookup("gpt2-125m"), zero_stage=i % 4, nodes=[1, 2, 4][i % 3], ranks_per_node=1,
                          filesystem="fs", repetition=i, checkpoint=CheckpointOptions(scale=0.001))
            files = StudyPaths(root).attempt(point.point_id, 1)
            files.dir.mkdir(parents=True)
            task = WorkerTask(study="bench-submit", point_id=point.point_id, point=point, filesystem_path=str(root),
                              result_path=str(files.result), error_path=str(files.error))
            files.task.write_text(task.model_dump_json())
            launches.append(Launch("bench-submit", point.point_id, 1, point, files, None))
        shapes = {shape_of(options, launch) for launch in launches}
        backend = SlurmBackend(options, root / "slurm")
        handles = []
        t0 = time.perf_counter()
        backend.launch(launches, lambda launch, h: handles.append(h), lambda u: None)
        elapsed = time.perf_counter() - t0
        arrays = sorted({h.job_id.split("_")[0] for h in handles})
        subprocess.run(["scancel", *arrays], check=False)
    verdict = "ok" if backend.sbatch_calls == len(shapes) == len(arrays) else "MISSED"
    print(f"submission: {points} points, {len(shapes)} shapes -> {backend.sbatch_calls} sbatch calls, "
          f"{len(arrays)} job arrays, {len(handles)} handles recorded in {elapsed:.2f} s  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
