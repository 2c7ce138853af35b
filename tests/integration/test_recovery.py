"""Recovery after a failure, for real: a checkpoint written by 4 mpiexec ranks, restored by a NEW
mpiexec of the restart world (`python -m worker.relaunch`) onto 2 and 8 ranks and with a TP change, each new rank
reading only its byte ranges; time to first step measured from the launch to the first completed step."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.checkpoint.recovery import before_restart_path, parse_recovery, restart_layout
from studyctl.definition.checkpoint.reshard import rank_reads, reshard_split
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.training import SimulatedStep
from studyctl.definition.result.result_schema import Result, WorkerError

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
STEP = SimulatedStep(compute_s=0.05, allreduce_mib=0.5)


def make_task(tmp_path: Path, recovery: object, tp: int = 2, zero: int = 3, **opts: object) -> tuple[Path, Point]:
    options = {"scale": 0.002, "writes": 1, "reads": 1, "buffer_mib": 4, "block_mib": 1, **opts}
    if options.get("strategy") == "tiered":
        options.update(tier="tier", step_s=0.02, compute="accelerator", allreduce_mib=0.5, replaced_nodes=0)
    rec = parse_recovery(recovery)
    assert rec is not None
    point = Point(model=lookup("gpt2-125m"), zero_stage=zero, tensor_parallel=tp, nodes=2, ranks_per_node=2,
                  filesystem="fs", checkpoint=CheckpointOptions(**options),
                  recovery=rec.model_copy(update={"step": STEP}))
    for name in ("fs", "tier", "out"):
        (tmp_path / name).mkdir(exist_ok=True)
    out = tmp_path / "out"
    task = WorkerTask(study="rec", point_id=point.point_id, point=point, filesystem_path=str(tmp_path / "fs"),
                      result_path=str(out / "result.json"), error_path=str(out / "error.json"),
                      tier_path=str(tmp_path / "tier"), tier_kind="local")
    path = out / "task.json"
    path.write_text(task.model_dump_json())
    return path, point


def relaunch(task: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.relaunch", str(task), "mpiexec", MPIEXEC],
                          capture_output=True, text=True, timeout=600)


def expected_bytes(point: Point) -> list[int]:
    """Per new rank, the bytes the reshard map gives it under the point's restore mode (rank: DLIO's)."""
    assert point.recovery is not None
    old = point.parallelism
    new = restart_layout(point.model, old, point.recovery)
    per_rank = []
    for rank in range(new.world_size):
        _, own, shared = reshard_split(point.model, old, new, rank, point.checkpoint.scale, point.checkpoint.naming)
        per_rank.append(sum(r.length for r in rank_reads(own, shared, rank < new.model_parallel,
                                                         point.checkpoint.restore)))
    return per_rank


@pytest.mark.parametrize(("recovery", "tp", "zero"), [({"shrink_to": 2}, 2, 3), ({"grow_to": 8}, 2, 3),
                                                      ({"grow_to": 8, "tensor_parallel": 1}, 2, 1)])
def test_a_4_rank_checkpoint_restarts_on_another_world(tmp_path: Path, recovery: dict[str, int], tp: int,
                                                       zero: int) -> None:
    task, point = make_task(tmp_path, recovery, tp=tp, zero=zero)
    before = time.time()
    proc = relaunch(task)
    took = time.time() - before
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    x = result.recovery
    assert x is not None and x.old_world_size == 4 and x.new_world_size == point.recovery.world_size  # type: ignore[union-attr]
    assert x.new_tensor_parallel == (recovery.get("tensor_parallel") or tp)
    assert x.bytes_restored_per_rank == expected_bytes(point), "each new rank reads exactly its byte ranges"
    if zero == 3 and "tensor_parallel" not in recovery:  # nothing replicated: the new ranks together read the
        written = result.sizes.written_checkpoint_bytes  # checkpoint once (to the scaled tensors' rounding)
        assert sum(x.bytes_restored_per_rank) == pytest.approx(written, rel=1e-3)
    assert 0 < x.launch_s < took and x.restore_s > 0 and x.ready_s >= STEP.compute_s
    assert x.time_to_first_step_s == pytest.approx(x.launch_s + x.setup_s + x.restore_s + x.ready_s)
    # launch to the first completed step: the wall between the phases is counted (setup), only the study's own
    # cold-read preparation is left out, and said; all of it inside the relaunch's own wall time
    assert x.setup_s > 0 and x.prepare_s >= 0
    assert x.time_to_first_step_s + x.prepare_s < took
    assert x.launcher == "mpiexec" and x.shared_clock
    assert not os.path.exists(before_restart_path(str(tmp_path / "out" / "result.json")))
    assert not any((tmp_path / "fs").rglob("*.pt")) and not any(p.is_file() for p in (tmp_path / "fs").rglob("*")), \
        "the restart removes the checkpoint once restored"


def test_lost_nodes_restore_the_lost_nodes_files_from_shared_storage(tmp_path: Path) -> None:
    task, _ = make_task(tmp_path, {"lost_nodes": 1}, tp=1, zero=3, strategy="tiered")
    proc = relaunch(task)
    assert proc.returncode == 0, proc.stderr[-3000:]
    x = Result.model_validate_json((tmp_path / "out" / "result.json").read_text()).recovery
    assert x is not None and x.scenario == "lost_nodes 1" and x.new_world_size == 4
    # node 0 kept its tier copy, node 1 (replaced) read shared storage: half the bytes each way (ZeRO-3, even)
    assert 0 < x.tier_bytes < x.bytes_read
    assert x.tier_bytes == sum(x.bytes_restored_per_rank[:2])
    assert not any(p.is_file() for p in (tmp_path / "tier").rglob("*")), "tier copies removed after the restart"


def test_a_restart_world_started_without_the_launchers_stamp_is_refused_in_one_line(tmp_path: Path) -> None:
    task, _ = make_task(tmp_path, "same", tp=1)
    env = {k: v for k, v in os.environ.items() if k != "STUDYCTL_LAUNCH_T0"}
    proc = subprocess.run([MPIEXEC, "-n", "4", sys.executable, "-m", "worker.restart", str(task)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    error = WorkerError.model_validate_json((tmp_path / "out" / "error.json").read_text())
    assert error.failure_class == "config" and "STUDYCTL_LAUNCH_T0" in error.reason
