"""Checkpoint strategies and restore modes, for real: mpiexec ranks, real files, a real node-local tier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.layout import rank_files, step_dir_name, summarize
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.result.result_schema import Result
from studyctl.host import mount_of
from studyctl.units import MIB

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
ALLREDUCE_MIB = 0.5


def run_point(tmp_path: Path, nodes: int = 2, rpn: int = 2, zero: int = 1, io_mode: str = "buffered",
              **opts: object) -> Result:
    options = {"scale": 0.002, "writes": 2, "reads": 2, "buffer_mib": 4, "block_mib": 1, **opts}
    if options.get("strategy", "sync") != "sync":  # what expansion gives background strategies
        options = {"step_s": 0.02, "compute": "accelerator", "allreduce_mib": ALLREDUCE_MIB, **options}
    if options.get("strategy") == "tiered":
        options.setdefault("tier", "tier")
    point = Point(model=lookup("gpt2-125m"), zero_stage=zero, nodes=nodes, ranks_per_node=rpn, filesystem="fs",
                  io_mode=io_mode, checkpoint=CheckpointOptions(**options))
    for name in ("fs", "tier"):  # both must exist: the worker never creates a filesystem's own directory
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    task = WorkerTask(study="strat", point_id=point.point_id, point=point, filesystem_path=str(tmp_path / "fs"),
                      result_path=str(out / "result.json"), error_path=str(out / "error.json"),
                      tier_path=str(tmp_path / "tier"), tier_kind="local")
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    proc = subprocess.run([MPIEXEC, "-n", str(point.world_size), sys.executable, "-m", "worker", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Result.model_validate_json((out / "result.json").read_text())


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.mark.parametrize(("strategy", "restore"), [("sync", "broadcast"), ("async", "rank"), ("tiered", "rank"),
                                                   ("tiered", "broadcast")])
def test_each_strategy_and_restore_mode_measures_its_fields(tmp_path: Path, strategy: str, restore: str) -> None:
    result = run_point(tmp_path, strategy=strategy, restore=restore)
    info = result.strategy
    assert info is not None and info.strategy == strategy and info.restore_mode == restore
    writes = [c for c in result.checkpoints if c.phase == "write"]
    by_index = {(s.phase, s.index): s for s in info.checkpoints}
    total = result.sizes.written_checkpoint_bytes
    for c in writes:
        st = by_index[("write", c.index)]
        assert 0 < st.blocking_s <= c.span_s, "training cannot be blocked longer than the checkpoint took"
        if strategy == "sync":
            assert st.blocking_s == c.duration_max_s and st.background_s == 0 and st.background_bytes == 0
        else:
            assert st.background_bytes == total and st.background_s > 0 and st.background_GiBps > 0
            assert st.background_s <= c.span_s, "the background work ends when the checkpoint is durable"
            assert st.compute_steps > 0 and st.compute_steps % result.point.world_size == 0, \
                "every rank steps until every background part is done, and all stop on the same step"
            assert st.allreduce_bytes == st.compute_steps * int(ALLREDUCE_MIB * MIB), "each step all-reduced"
            assert st.idle_step_s_mean is not None and st.idle_step_s_mean >= 0.02
            assert st.interference_ci_s is not None and st.interference_ci_s >= 0
    assert (info.compute_step_s_idle is not None) == (strategy != "sync")
    prov = result.provenance
    assert prov.ranks_on_host == result.point.world_size, "simulated nodes: every rank on this host"
    assert prov.host_cores is not None and prov.host_cores >= 1 and prov.launch_s is not None and prov.launch_s > 0
    threads = {"sync": 0, "async": 1, "tiered": 2}[strategy]  # a persist thread; a drain and its reader
    assert prov.background_threads_on_host == threads * result.point.world_size
    assert info.tier_fstype == (mount_of(str(tmp_path / "tier"))["fstype"] if strategy == "tiered" else None)
    if strategy == "async":
        assert info.snapshot_bytes_per_rank_max == result.sizes.bytes_per_rank_max
    for c in (c for c in result.checkpoints if c.phase == "read"):
        st = by_index[("read", c.index)]
        assert c.bytes == result.sizes.read_bytes_per_restore
        obtained = st.tier_bytes + st.shared_bytes + st.broadcast_bytes
        assert obtained == c.bytes, "every byte restored came from the tier, shared storage or a broadcast"
        assert st.read_s <= c.duration_max_s
        if restore == "broadcast":  # ZeRO-1, 4 replicas: replica 0's weights reach 3 others by MPI_Bcast
            weights = sum(f.nbytes for f in rank_files(result.point.model, result.point.parallelism, 0,
                                                        result.point.checkpoint.scale) if f.kind == "model")
            assert st.broadcast_bytes == 3 * weights and st.broadcast_s > 0
        if strategy == "tiered":  # the tier keeps the last checkpoint (tier_keep 1): older ones come from shared
            on_tier = c.index == 1
            assert st.tier_bytes == (c.bytes - st.broadcast_bytes if on_tier else 0)
            assert st.shared_bytes == (0 if on_tier else c.bytes - st.broadcast_bytes)
    assert files_under(tmp_path / "fs") == [] and files_under(tmp_path / "tier") == []


def test_broadcast_restores_what_full_restores(tmp_path: Path) -> None:
    full = run_point(tmp_path / "full", restore="full", writes=1, reads=1)
    bcast = run_point(tmp_path / "bcast", restore="broadcast", writes=1, reads=1)
    assert bcast.sizes.read_bytes_per_restore == full.sizes.read_bytes_per_restore
    assert [c.bytes for c in bcast.checkpoints if c.phase == "read"] == \
        [c.bytes for c in full.checkpoints if c.phase == "read"]


def node_bytes(result: Result, node: int) -> int:
    p = result.point
    ranks = range(node * p.ranks_per_node, (node + 1) * p.ranks_per_node)
    return sum(f.nbytes for r in ranks for f in rank_files(p.model, p.parallelism, r, p.checkpoint.scale))


def test_tiered_restore_after_losing_a_node_reads_from_shared_storage(tmp_path: Path) -> None:
    result = run_point(tmp_path, strategy="tiered", zero=3, replaced_nodes=1, writes=1, reads=1)
    (restore,) = [s for s in result.strategy.checkpoints if s.phase == "read"]
    assert restore.tier_bytes == node_bytes(result, 0), "the surviving node restores from its tier"
    assert restore.shared_bytes == node_bytes(result, 1), "the replaced node restores from shared storage"


@pytest.mark.parametrize("restore", ["rank", "broadcast"])
def test_a_single_node_replaced_restores_everything_from_shared_storage(tmp_path: Path, restore: str) -> None:
    result = run_point(tmp_path, nodes=1, rpn=2, strategy="tiered", restore=restore, replaced_nodes=1, writes=1,
                       reads=1)
    (restore_timing,) = [s for s in result.strategy.checkpoints if s.phase == "read"]
    assert restore_timing.tier_bytes == 0 and restore_timing.shared_bytes > 0
    read = next(c for c in result.checkpoints if c.phase == "read")
    assert restore_timing.shared_bytes + restore_timing.broadcast_bytes == read.bytes
    assert result.strategy.replaced_nodes == 1


def thread_cpu_per_step(result: Result) -> float:
    """The rank's main thread's CPU seconds per step beside the background writes: its CPU share of the compute ×
    the step's time, over every write (an upper bound: the rest of a step, a one-rank all-reduce, is microseconds)."""
    assert result.strategy is not None
    writes = [(s.compute_cpu_share, s.compute_step_s_mean, s.compute_steps) for s in result.strategy.checkpoints
              if s.phase == "write" and s.compute_steps]
    assert writes and all(share is not None and mean for share, mean, _ in writes), writes
    return sum((share or 0.0) * (mean or 0.0) * n for share, mean, n in writes) / sum(n for _, _, n in writes)


def test_the_accelerator_step_holds_a_core_for_its_dispatch_and_the_cpu_step_for_all_of_it(tmp_path: Path) -> None:
    """Thread CPU time of a rank's main thread over its steps' compute: waiting on a device uses none, the dispatch
    its share of the step (calibrated in CPU time), the CPU step its core. Compared as CPU seconds, not as shares of
    wall time: a loaded machine stretches a step's wall time (the CPU step's share fell to 0.28 under load) but
    never gives a sleeping thread CPU."""
    cpu_s, shares = {}, {}
    for compute, dispatch in (("accelerator", 0.0), ("accelerator", 0.5), ("cpu", None)):
        result = run_point(tmp_path / f"{compute}{dispatch}", nodes=1, rpn=1, strategy="async", compute=compute,
                           step_s=0.05, dispatch_share=dispatch, writes=2, reads=0)
        assert result.strategy is not None
        shares[dispatch] = result.strategy.checkpoints[0].compute_cpu_share
        cpu_s[dispatch] = thread_cpu_per_step(result)
    assert shares[0.0] is not None and shares[0.0] < 0.1, shares  # load only lowers a share
    assert cpu_s[None] > 0 and cpu_s[0.0] < 0.1 * cpu_s[None], (cpu_s, shares)
    assert 0.5 < cpu_s[0.5] / (0.5 * 0.05) < 2.0, (cpu_s, shares)


def test_one_drainer_per_node_drains_every_file(tmp_path: Path) -> None:
    result = run_point(tmp_path, strategy="tiered", drain="node", zero=3, tier_keep=2, writes=3, reads=2)
    expected = summarize(result.point.model, result.point.parallelism, result.point.checkpoint.scale).total_bytes
    writes = [s for s in result.strategy.checkpoints if s.phase == "write"]
    assert [s.background_bytes for s in writes] == [expected] * 3
    reads = [s for s in result.strategy.checkpoints if s.phase == "read"]
    assert [(s.tier_bytes, s.shared_bytes) for s in reads] == [(0, expected), (expected, 0)], \
        "the tier keeps the last 2 of 3 checkpoints: step 0 comes from shared storage, step 1 from the tier"
    assert result.strategy.drain == "node" and result.strategy.tier_keep == 2


@pytest.mark.parametrize("io_mode", ["direct", "hybrid"])
@pytest.mark.parametrize("strategy", ["async", "tiered"])
def test_background_writes_leave_exact_files_in_every_io_mode(tmp_path: Path, strategy: str, io_mode: str) -> None:
    result = run_point(tmp_path, nodes=1, rpn=2, strategy=strategy, io_mode=io_mode, writes=1, reads=1, keep=True)
    point = result.point
    assert result.io.io_mode_used == io_mode
    for rank in range(point.world_size):
        opts = point.checkpoint
        for f in rank_files(point.model, point.parallelism, rank, opts.scale, opts.naming):
            (path,) = (tmp_path / "fs").glob(f"strat*/{result.point_id}/{step_dir_name(0, opts.naming)}/{f.name}")
            assert path.stat().st_size == f.nbytes, f"{f.name}: the persisted file has the layout's size"
            with path.open("rb") as fh:
                head = fh.read(1 << 16)
            assert head.count(0) < len(head) // 2, "the snapshot's bytes, not a hole of zeros"
