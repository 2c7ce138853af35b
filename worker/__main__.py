"""`mpiexec -n N python -m worker TASK.json`: one line on stderr and exit 3 on a known failure; exit
RECORD_REFUSED_EXIT where the results disk had no room for the error record."""

from __future__ import annotations

import contextlib
import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m worker TASK.json", file=sys.stderr)
        return 2
    from mpi4py import MPI

    from studyctl.definition.result.result_schema import RECORD_REFUSED_EXIT
    from worker.record import RecordRefused
    from worker.run import WorkerFailure, run_task

    try:
        run_task(argv[0])  # an unexpected exception: run_task records it and aborts every rank
    except RecordRefused:
        _quiet()
        return RECORD_REFUSED_EXIT
    except WorkerFailure as failure:
        if MPI.COMM_WORLD.Get_rank() == 0:
            with contextlib.suppress(OSError):
                print(f"studyctl worker: {failure.failure_class.value}: {failure.reason}", file=sys.stderr, flush=True)
        return 3
    return 0


def _quiet() -> None:
    """Output the full disk refused is dropped: Python's exit would otherwise turn its failed flush into exit 120."""
    for name in ("stdout", "stderr"):
        setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 - open until the process ends


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
