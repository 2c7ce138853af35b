"""Runs the worker on a task and prints every rank's peak RSS (KiB) as JSON from rank 0."""

from __future__ import annotations

import json
import resource
import sys

from mpi4py import MPI

from worker.run import run_task

if __name__ == "__main__":
    run_task(sys.argv[1])
    peaks = MPI.COMM_WORLD.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, root=0)
    if MPI.COMM_WORLD.Get_rank() == 0:
        print(json.dumps(peaks))
