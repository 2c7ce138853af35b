"""An MPI program for the resharding tests: a world of the NEW size restores a checkpoint the worker wrote with
the OLD layout, with worker.reshard_read, and rank 0 writes every rank's record as JSON.

    mpiexec -n NEW python -m tests.integration.reshard_mpi TASK.json STEP_DIR OUT.json TP PP   (in the repo root)

TASK.json is the writing point's task (model, scale, naming, block, I/O mode, restore mode); the restart keeps
its ZeRO stage and takes TP and PP from the arguments. Every chunk a rank gets, read or received by broadcast,
is compared with the file's bytes at its offset (after the reads, so the check never warms them).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

from mpi4py import MPI

from studyctl.definition.checkpoint.points import WorkerTask, cold_read_method
from studyctl.definition.checkpoint.reshard import ByteRange, restart_parallelism
from worker import io
from worker.reshard_read import read_resharded


def main(task_path: str, step_dir: str, out_path: str, tp: int, pp: int) -> None:
    comm = MPI.COMM_WORLD
    point = WorkerTask.model_validate_json(Path(task_path).read_text()).point
    opts = point.checkpoint
    old = point.parallelism
    new = restart_parallelism(old, comm.Get_size(), tp, pp, model=point.model)
    direct = cold_read_method(point.io_mode, opts.cold_read) == "direct"
    if comm.Get_rank() == 0 and not direct:
        for f in Path(step_dir).iterdir():
            io.evict(str(f))
    comm.Barrier()
    buf = io.Buffer.allocate(opts.buffer_mib << 20)
    split = io.Split()
    checked = {"delivered_bytes": 0, "wrong_chunks": 0}

    def check(r: ByteRange, offset: int, data: memoryview) -> None:
        """Every chunk delivered (read or received) is the file's bytes at that offset."""
        path = Path(step_dir) / r.name
        with open(path, "rb") if path.exists() else nullcontext(None) as f:
            checked["wrong_chunks"] += f is None or os.pread(f.fileno(), len(data), offset) != bytes(data)
        checked["delivered_bytes"] += len(data)

    try:
        got = read_resharded(comm, point, old, new, Path(step_dir), buf, opts.block_mib << 20, direct, split, check)
        record = {**asdict(got), **checked, "direct": direct, "error": None}
    except OSError as exc:  # raised after the collective part: every rank still reports
        record = {**checked, "direct": direct, "error": str(exc)}
    records = comm.gather(record, root=0)
    if comm.Get_rank() == 0:
        Path(out_path).write_text(json.dumps(records))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
