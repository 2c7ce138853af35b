"""studyctl's engine calls and the plain script's calls on the same tensors in the same processes, alternating.

    mpiexec -n 2 python -m benchmarks.engines_paired ENGINE REPS DIR [SCALE]    (ENGINE: torch_save | dcp)
    python -m benchmarks engines_paired [REPS]                  (both engines at scale 0.3, through mpiexec)

`engines` compares whole runs (a studyctl point against a script's process), which on this machine swing with
the load from one minute to the next and with the memory each process is handed (`page_reuse`: memory this VM
gave back to its host costs ~10 us of CPU a page to touch again). This pairs the calls themselves: each rank
holds one studyctl engine (`worker.engines`, its tensors the bench's layout) and the direct script's calls
(`engines_direct`) are handed the same tensors. Per repetition and side (which goes first alternating): a sync
save, its cold restore (every file of the step evicted on every rank, then a barrier; studyctl into an allocated
state, the script into zeros allocated once, as `engines_direct` does), an async save waited for; then both
directories removed. A first repetition of both sides, not counted, pays each side's first-call costs (the
first call in the process ran up to 2x slower, whichever side made it). What differs is only what the engine
does around the framework's call (the stamp of every page before the clock, the storage seam's streams for
torch_save, the writer built inside the timed call).

The verdict: studyctl's call over the script's (trimmed means of the slowest rank's seconds), with its 95%
bootstrap interval from repetitions resampled as pairs (each pair's two calls seconds apart, so a change of load
or memory between repetitions moves both). "within" needs the whole interval inside the target band,
"outside" the whole interval beyond it; "undecided" is an interval reaching both (this machine's noise at this
many calls, not a verdict).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import engines_bench, engines_direct
from benchmarks.equivalence import ratio_interval, trimmed_mean, verdict

FIGURES = ("sync", "restore", "blocked", "persist")
REPS = 40  # 16 decided 1-2 of 8 figures here, 40 decided 5-7 (4-6 minutes for both engines)


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


def main(engine: str, reps: int, root: Path, scale: float = engines_bench.SCALE) -> None:
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
    plan = file_tensors(CATALOG[engines_bench.MODEL], Parallelism(1, 1, world, engines_bench.ZERO), rank, scale)
    ours = make_engine(EngineOptions(engine=engine), plan, PathTarget(lambda i: root / "ours" / f"step{i}"), comm)
    ours.allocate()
    into = RankState(plan, ours.state.device, rank)
    into.allocate(fill=False)
    theirs = {n: {k: torch.zeros_like(t) for k, t in named.items()} for n, named in ours.state.files.items()}
    config = {"root": str(root / "direct"), "engine": engine, "fsync": True, "dcp_threads": 1}
    rows: list[tuple[str, dict[str, float]]] = []
    for k in range(-1, reps):  # repetition -1 warms both sides up (the process's first calls), not counted
        for side in ("studyctl", "direct") if k % 2 == 0 else ("direct", "studyctl"):
            got = studyctl_calls(comm, ours, into, k + 1) if side == "studyctl" else \
                direct_calls(comm, config, ours.state.files, theirs, k + 1)
            if k >= 0:
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
    report(engine, every, world, scale)


def report(engine: str, every: list[list[tuple[str, dict[str, float]]]], world: int, scale: float) -> None:
    rows = every[0]
    reps = len(rows) // 2
    print(f"# {engine}: {reps} repetitions a side, alternating; {engines_bench.MODEL} scale {scale}, "
          f"ZeRO-{engines_bench.ZERO}, {world} ranks; seconds, the slowest rank, trimmed mean (min-max); studyctl / "
          f"direct: ratio of trimmed means [95% interval]")
    for figure in FIGURES:
        slowest = {side: [max(r[i][1][figure] for r in every) for i, row in enumerate(rows) if row[0] == side]
                   for side in ("studyctl", "direct")}
        cells = [f"{side} {trimmed_mean(v):.3f} ({min(v):.3f}-{max(v):.3f})" for side, v in slowest.items()]
        mid, low, high = ratio_interval(slowest["studyctl"], slowest["direct"])
        print(f"{engine} {figure}: {', '.join(cells)}; studyctl / direct {mid:.2f}x [{low:.2f}-{high:.2f}]: "
              f"{verdict(low, high, engines_bench.TARGET)}", flush=True)


def run_all(reps: int = REPS, scale: float = 0.3, scratch: Path = Path("/var/tmp")) -> None:
    """Each engine's paired run under mpiexec (engines_bench's ranks and threads), its lines printed."""
    env = {**os.environ, "OMP_NUM_THREADS": str(engines_bench.THREADS)}
    for engine in engines_bench.ENGINES:
        root = Path(tempfile.mkdtemp(prefix="engines-paired-", dir=scratch))
        try:
            proc = subprocess.run([engines_bench.MPIEXEC, "-n", str(engines_bench.RANKS), sys.executable, "-m",
                                   "benchmarks.engines_paired", engine, str(reps), str(root), str(scale)],
                                  capture_output=True, text=True, env=env)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if proc.returncode:
            raise RuntimeError(f"engines_paired ({engine}) failed: {proc.stderr[-2000:]}")
        print(proc.stdout, end="", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else
         engines_bench.SCALE)
