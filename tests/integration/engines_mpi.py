"""An MPI program for the engine tests: every rank saves its real tensors through a checkpoint engine, sync
and async, changes them, restores cold, and rank 0 writes every rank's record as JSON.

    mpiexec -n N python -m tests.integration.engines_mpi CONFIG.json OUT.json   (in the repo root)

CONFIG: {"model", "tp", "pp", "zero", "scale", "root", "saves": ["sync", "async", ...], "options": {...}}, the
options those of `EngineOptions`. mpi4py is imported inside `main`: DCP's process executor starts its child with
multiprocessing's spawn, which imports this module again, and an MPI_Init there would join the parent's job.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def run(comm: Any, config: dict[str, Any]) -> dict[str, Any]:
    from studyctl.definition.checkpoint.engine_tensors import file_tensors
    from studyctl.definition.checkpoint.layout import Parallelism
    from studyctl.definition.inputs.catalog import CATALOG
    from worker.engines import EngineOptions, make_engine

    rank = comm.Get_rank()
    par = Parallelism(config["tp"], config["pp"], comm.Get_size() // (config["tp"] * config["pp"]), config["zero"])
    plan = file_tensors(CATALOG[config["model"]], par, rank, config["scale"])
    root = Path(config["root"])
    engine = make_engine(EngineOptions(**config["options"]), plan, lambda step: root / f"step{step}", comm)
    engine.allocate()
    state = engine.state
    out: dict[str, Any] = {"rank": rank, "plan_bytes": sum(f.nbytes for f in plan),
                           "plan_files": [f.file.name for f in plan],
                           "plan_tensors": sum(len(f.tensors) for f in plan), "saves": []}
    for step, how in enumerate(config["saves"]):
        comm.Barrier()
        if how == "sync":
            timing: Any = engine.save(step)
        else:
            handle = engine.async_save(step)
            timing = handle.wait()
        saved = state.digest()
        state.stamp(10_000 + step)  # training moves on: the live tensors differ from the checkpoint
        changed = state.digest()
        engine.evict(step)
        comm.Barrier()
        loaded = engine.load(step)
        out["saves"].append({"how": how, "timing": vars(timing), "files": engine.files(step),
                             "restored": state.digest() == saved, "changed": changed != saved,
                             "load": vars(loaded)})
    engine.close()
    return out


def main(config_path: str, out_path: str) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    record = run(comm, json.loads(Path(config_path).read_text()))
    records = comm.gather(record, root=0)
    if comm.Get_rank() == 0:
        Path(out_path).write_text(json.dumps(records))
    from worker.engines import end_group

    end_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
