"""`mpiexec -n N python -m worker TASK.json`: one line on stderr and exit 3 on a known failure."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m worker TASK.json", file=sys.stderr)
        return 2
    from mpi4py import MPI

    from worker.run import WorkerFailure, run_task

    try:
        run_task(argv[0])  # an unexpected exception: run_task records it and aborts every rank
    except WorkerFailure as failure:
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"studyctl worker: {failure.failure_class.value}: {failure.reason}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
