"""`mpiexec -n N python -m worker TASK.json`: one line on stderr and exit 3 on a known failure."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m worker TASK.json", file=sys.stderr)
        return 2
    from mpi4py import MPI

    from worker.run import WorkerFailure, run_task

    try:
        run_task(argv[0])
    except WorkerFailure as failure:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"studyctl worker: {failure.failure_class.value}: {failure.reason}", file=sys.stderr, flush=True)
        return 3
    except Exception as exc:  # a bug or an unexpected environment: record it, then take every rank down
        traceback.print_exc()
        _record_crash(argv[0], exc)
        MPI.COMM_WORLD.Abort(1)
    return 0


def _record_crash(task_path: str, exc: Exception) -> None:
    try:
        from studyctl.fsutil import atomic_write_text
        from studyctl.points import WorkerTask
        from worker.result import SCHEMA_VERSION, WorkerError

        task = WorkerTask.model_validate_json(Path(task_path).read_text())
        record = WorkerError(schema_version=SCHEMA_VERSION, point_id=task.point_id, attempt=task.attempt,
                             failure_class="worker_crash", reason=f"{type(exc).__name__}: {exc}"[:500])
        atomic_write_text(Path(task.error_path), record.model_dump_json(indent=1))
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
