"""studyctl's engine call and the plain script's call on the same tensors in the same processes, alternating.

    mpiexec -n 2 python -m benchmarks.engines_paired ENGINE REPS DIR     (ENGINE: torch_save | dcp)

`engines` compares whole runs (a studyctl point against a script's process), which on this shared machine swing
with the load from one minute to the next. This pairs the calls themselves: each rank holds one studyctl engine
(`worker.engines`, its tensors the bench's layout) and the direct script's `save` (`engines_direct`) is handed
the same tensors; the two sync saves alternate (which goes first alternating too), each into its own directory,
removed between calls, the ranks meeting without spinning. What differs is only what the engine does around the
framework's call (the stamp of every page before the clock, the storage seam's stream for torch_save, the
writer built inside the timed call). Printed per side: the slowest rank's seconds of each save, their median,
and the median over calls of the ranks' largest CPU seconds (the process's, every thread's; studyctl's include its
off-clock stamp).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks import engines_bench, engines_direct


def main(engine: str, reps: int, root: Path) -> None:
    import torch.distributed as dist
    from mpi4py import MPI

    from studyctl.definition.checkpoint.engine_tensors import file_tensors
    from studyctl.definition.checkpoint.layout import Parallelism
    from studyctl.definition.inputs.catalog import CATALOG
    from worker.engines import EngineOptions, PathTarget, make_engine

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    plan = file_tensors(CATALOG[engines_bench.MODEL], Parallelism(1, 1, world, engines_bench.ZERO), rank,
                        engines_bench.SCALE)
    ours = make_engine(EngineOptions(engine=engine), plan, PathTarget(lambda i: root / "ours" / f"step{i}"), comm)
    ours.allocate()
    config = {"root": str(root / "direct"), "engine": engine, "fsync": True, "dcp_threads": 1}
    rows: list[tuple[str, float, float]] = []
    for k in range(reps):
        for side in ("studyctl", "direct") if k % 2 == 0 else ("direct", "studyctl"):
            if side == "studyctl":
                engines_direct.meet(comm)
                cpu = time.process_time()
                seconds = ours.save(k).seconds
                cpu = time.process_time() - cpu
            else:
                got = engines_direct.save(comm, config, ours.state.files, k, "sync")
                seconds, cpu = got["seconds"], got["cpu_s"]
            rows.append((side, seconds, cpu))
            engines_direct.meet(comm)
            if rank == 0:
                shutil.rmtree(root / ("ours" if side == "studyctl" else "direct"), ignore_errors=True)
            engines_direct.meet(comm)
    every = comm.gather(rows, root=0)
    ours.close()
    if dist.is_initialized():
        dist.destroy_process_group()
    if every is None:
        return
    for side in ("studyctl", "direct"):
        calls = [i for i, row in enumerate(rows) if row[0] == side]
        wall = [max(r[i][1] for r in every) for i in calls]
        cpu_s = [max(r[i][2] for r in every) for i in calls]
        print(f"{engine} {side}: sync save {statistics.median(wall):.3f} s median "
              f"({', '.join(f'{w:.3f}' for w in wall)}), CPU {statistics.median(cpu_s):.3f} s")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))
