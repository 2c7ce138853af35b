"""studyctl's engine calls and the plain script's calls on the same tensors in the same processes, alternating.

    mpiexec -n 2 python -m benchmarks.engines_paired ENGINE REPS DIR     (ENGINE: torch_save | dcp)

`engines` compares whole runs (a studyctl point against a script's process), which on this machine swing with
the load from one minute to the next and with the memory each process is handed (`page_reuse`: memory this VM
gave back to its host costs ~10 us of CPU a page to touch again). This pairs the calls themselves: each rank
holds one studyctl engine (`worker.engines`, its tensors the bench's layout) and the direct script's calls
(`engines_direct`) are handed the same tensors. Per repetition and side (which goes first alternating): a sync
save, its cold restore (every file of the step evicted on every rank, then a barrier; studyctl into an allocated
state, the script into zeros allocated once, as `engines_direct` does), an async save waited for; then both
directories removed. What differs is only what the engine does around the framework's call (the stamp of every
page before the clock, the storage seam's streams for torch_save, the writer built inside the timed call).
Printed per figure: each side's median over calls of the slowest rank's seconds, and studyctl / direct.
"""

from __future__ import annotations

import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks import engines_bench, engines_direct

FIGURES = ("sync", "restore", "blocked", "persist")


def _cold(comm: Any, d: Path) -> None:
    """Every file of a checkpoint evicted on every rank, then the ranks meet."""
    engines_direct.drop_pages([p for p in d.iterdir() if p.is_file()])
    engines_direct.meet(comm)


def studyctl_calls(comm: Any, ours: Any, into: Any, k: int) -> dict[str, float]:
    engines_direct.meet(comm)
    got = {"sync": ours.save(2 * k).seconds}
    _cold(comm, ours.step_path(2 * k))
    got["restore"] = ours.load(2 * k, into).seconds
    engines_direct.meet(comm)
    timing = ours.async_save(2 * k + 1).wait()
    return {**got, "blocked": timing.blocked_s, "persist": timing.done_s - timing.blocked_s}


def direct_calls(comm: Any, config: dict[str, Any], state: Any, into: Any, k: int) -> dict[str, float]:
    got = {"sync": engines_direct.save(comm, config, state, 2 * k, "sync")["seconds"]}
    d = Path(config["root"]) / f"step{2 * k}"
    _cold(comm, d)
    got["restore"] = engines_direct._load(config, d, into)["load_s"]
    saved = engines_direct.save(comm, config, state, 2 * k + 1, "async")
    return {**got, "blocked": saved["blocked_s"], "persist": saved["done_s"] - saved["blocked_s"]}


def main(engine: str, reps: int, root: Path) -> None:
    import torch
    import torch.distributed as dist
    from mpi4py import MPI

    from studyctl.definition.checkpoint.engine_tensors import file_tensors
    from studyctl.definition.checkpoint.layout import Parallelism
    from studyctl.definition.inputs.catalog import CATALOG
    from worker.engines import EngineOptions, PathTarget, make_engine
    from worker.engines.state import RankState

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(engines_bench.THREADS)
    plan = file_tensors(CATALOG[engines_bench.MODEL], Parallelism(1, 1, world, engines_bench.ZERO), rank,
                        engines_bench.SCALE)
    ours = make_engine(EngineOptions(engine=engine), plan, PathTarget(lambda i: root / "ours" / f"step{i}"), comm)
    ours.allocate()
    into = RankState(plan, ours.state.device, rank)
    into.allocate(fill=False)
    theirs = {n: {k: torch.zeros_like(t) for k, t in named.items()} for n, named in ours.state.files.items()}
    config = {"root": str(root / "direct"), "engine": engine, "fsync": True, "dcp_threads": 1}
    rows: list[tuple[str, dict[str, float]]] = []
    for k in range(reps):
        for side in ("studyctl", "direct") if k % 2 == 0 else ("direct", "studyctl"):
            got = studyctl_calls(comm, ours, into, k) if side == "studyctl" else \
                direct_calls(comm, config, ours.state.files, theirs, k)
            rows.append((side, got))
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
    print(f"# {engine}: {reps} repetitions a side, alternating; {engines_bench.MODEL} scale {engines_bench.SCALE}, "
          f"ZeRO-{engines_bench.ZERO}, {world} ranks; seconds, the slowest rank, median (min-max)")
    for figure in FIGURES:
        medians: dict[str, float] = {}
        cells = []
        for side in ("studyctl", "direct"):
            calls = [i for i, row in enumerate(rows) if row[0] == side]
            values = [max(r[i][1][figure] for r in every) for i in calls]
            medians[side] = statistics.median(values)
            cells.append(f"{side} {medians[side]:.3f} ({min(values):.3f}-{max(values):.3f})")
        ratio = medians["studyctl"] / medians["direct"]
        print(f"{engine} {figure}: {', '.join(cells)}; studyctl / direct {ratio:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))
