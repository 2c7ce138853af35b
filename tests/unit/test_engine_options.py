"""Engine options: ids kept at their defaults, settings that do not apply dropped, what plan shows and counts for
an engine point (DCP's files, real tensors' memory), and the refusals, through the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from studyctl.backends.machine import Machine, misfit
from studyctl.definition.checkpoint.engines import dcp_file_names, engine_tensor_bytes
from studyctl.definition.checkpoint.layout import Parallelism, rank_files
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, restore_files
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.training import SimulatedStep
from tests.cli import REPO, run_cli

STEP = SimulatedStep()
LLAMA = lookup("llama_7b")
# Computed by the code before engine options existed (main at d7d9321): a new option at its default keeps them.
PINNED = {
    "09ff395b9d67": Point(model=LLAMA, zero_stage=1, filesystem="scratch"),
    "f84b4d90ebc5": Point(model=lookup("llama3-70b"), zero_stage=3, tensor_parallel=8, nodes=4, ranks_per_node=8,
                          filesystem="lustre", io_mode="direct", repetition=2,
                          checkpoint=CheckpointOptions(scale=0.01, writes=2, reads=1, restore="full")),
    "55dfcd841322": Point(model=LLAMA, zero_stage=0, nodes=2, ranks_per_node=2, filesystem="scratch",
                          checkpoint=CheckpointOptions(strategy="async", writes=3, reads=1).for_strategy(STEP)),
    "bd32fa3007da": Point(model=LLAMA, zero_stage=2, nodes=2, ranks_per_node=2, filesystem="scratch",
                          checkpoint=CheckpointOptions(strategy="tiered", tier="shm", drain="node").for_strategy(STEP)),
}


@pytest.mark.parametrize("want", PINNED)
def test_points_keep_their_ids(want: str) -> None:
    assert PINNED[want].point_id == want


def _opts(**kw: object) -> CheckpointOptions:
    return CheckpointOptions.model_validate(kw).for_strategy(STEP)


def test_settings_of_another_engine_go_back_to_their_defaults() -> None:
    stream = _opts()
    assert _opts(crc32=False, dcp_threads=8, stager_async=True) == stream  # none applies to stream
    assert _opts(engine="torch_save", dcp_threads=8).dcp_threads == 1
    assert not _opts(engine="torch_save", crc32=False).crc32
    sync_dcp = _opts(engine="dcp", dcp_threads=4, stager_shared=True, pinned=True, dcp_executor="process")
    assert (sync_dcp.dcp_threads, sync_dcp.stager_shared, sync_dcp.pinned, sync_dcp.dcp_executor) == \
        (4, False, False, "thread")  # the stager and executor are async_save's
    async_dcp = _opts(engine="dcp", strategy="async", stager_shared=True, pinned=True, crc32=False)
    assert (async_dcp.stager_shared, async_dcp.pinned, async_dcp.crc32) == (True, True, True)
    point = Point(model=LLAMA, zero_stage=1, filesystem="scratch", checkpoint=_opts(state="torch"))
    assert point.point_id != "09ff395b9d67"  # state applies to every engine: another point


def test_dcp_names_match_torch_own_writer(tmp_path: Path) -> None:
    """What torch 2.13's FileSystemWriter writes for one rank with 3 threads, against `dcp_file_names`."""
    script = (
        "import os, sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp\n"
        "os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=sys.argv[2])\n"
        "dist.init_process_group('gloo', rank=0, world_size=1)\n"
        "dcp.save({'a': torch.zeros(8)}, storage_writer=dcp.FileSystemWriter(sys.argv[1], thread_count=3))\n"
        "dist.destroy_process_group()\n")
    port = str(29000 + os.getpid() % 1000)
    subprocess.run([sys.executable, "-c", script, str(tmp_path), port], check=True, timeout=120, capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*dcp_file_names(0, 3), ".metadata"])


def _brute_force_tensors(point: Point, ranks_per_node: int) -> int:
    """Per host, every rank's state (+ a copy when async) and the files its restore reads, rank by rank."""
    opts, par = point.checkpoint, point.parallelism
    per_rank = [(2 if opts.strategy == "async" else 1)
                * sum(f.nbytes for f in rank_files(point.model, par, r, opts.scale, opts.naming, opts.convention))
                + (sum(f.nbytes for f in restore_files(point.model, par, r, opts)) if opts.reads else 0)
                for r in range(par.ranks)]
    return max(sum(per_rank[h:h + ranks_per_node]) for h in range(0, par.ranks, ranks_per_node))


@pytest.mark.parametrize(("zero", "strategy", "writer", "restore", "shift", "rpn"), [
    (1, "sync", "dp0", "rank", 0, 2), (1, "async", "spread", "full", 0, 3), (0, "async", "dp0", "full", 3, 4),
    (2, "sync", "spread", "broadcast", 5, 1), (3, "async", "dp0", "rank", 2, 6), (0, "sync", "spread", "rank", 1, 12)])
def test_engine_memory_per_host_against_every_rank(zero: int, strategy: str, writer: str, restore: str, shift: int,
                                                   rpn: int) -> None:
    opts = _opts(engine="dcp", strategy=strategy, replicated_writer=writer, restore=restore, rank_shift=shift,
                 scale=0.01, state="torch")
    point = Point(model=LLAMA, zero_stage=zero, tensor_parallel=2, nodes=12 // rpn, ranks_per_node=rpn,
                  filesystem="scratch", checkpoint=opts)
    for per_host in (rpn, 12):
        assert engine_tensor_bytes(LLAMA, point.parallelism, per_host, opts) == _brute_force_tensors(point, per_host)
    assert engine_tensor_bytes(LLAMA, Parallelism(2, 1, 6, zero), rpn, _opts()) == 0  # stream holds a buffer


def test_local_backend_refuses_engine_tensors_over_memory() -> None:
    opts = _opts(engine="torch_save", scale=0.05)
    point = Point(model=LLAMA, zero_stage=1, nodes=1, ranks_per_node=2, filesystem="scratch", checkpoint=opts)
    state = point.layout().total_bytes
    stream = point.model_copy(update={"checkpoint": _opts(scale=0.05)})
    room = Machine(cores=64, available_memory_bytes=2 * 200 * 2**20 + state)  # buffers fit, the tensors do not
    assert misfit(stream, room, 1) is None
    reason = misfit(point, room, 1)
    assert reason is not None and "torch_save's real tensors" in reason


SWEEP = """study: engines
models: [llama_7b]
matrix: {{zero_stage: 1, ranks_per_node: 2{matrix}}}
filesystems:
  scratch: {{path: {path}, kind: local}}
checkpoint: {{scale: 0.001, writes: 1, reads: 1{checkpoint}}}
ceilings: off
calibration: off
"""


def _sweep(tmp_path: Path, matrix: str = "", checkpoint: str = "") -> Path:
    path = tmp_path / "engines.yaml"
    path.write_text(SWEEP.format(matrix=matrix, checkpoint=checkpoint, path=tmp_path))
    return path


def test_plan_shows_an_engine_point(tmp_path: Path) -> None:
    import json

    res = run_cli("plan", str(_sweep(tmp_path, ", engine: [stream, dcp]", ", dcp_threads: 3")), "--json")
    assert res.returncode == 0, res.stderr
    stream, dcp = json.loads(res.stdout)
    assert dcp["files_per_checkpoint"] == 2 * 3 + 1 and dcp["engine_files"] == "__{rank}_{0..2}.distcp + .metadata"
    assert stream["files_per_checkpoint"] == 3 and stream["tensor_memory_per_host_bytes"] == 0
    assert dcp["tensor_memory_per_host_bytes"] == 2 * dcp["checkpoint_bytes"]  # state and restored state, 2 ranks
    assert dcp["worker_memory_per_host_bytes"] - stream["worker_memory_per_host_bytes"] == \
        dcp["tensor_memory_per_host_bytes"]
    table = run_cli("plan", str(_sweep(tmp_path, ", engine: dcp, state: torch")))
    assert table.returncode == 0 and "engine: dcp×1" in table.stdout and "state: torch×1" in table.stdout


@pytest.mark.parametrize(("matrix", "checkpoint", "words"), [
    ("", ", engine: torch-save", ["checkpoint.engine", "'stream', 'torch_save', 'dcp'"]),
    (", state: [megatron, fp32]", "", ["matrix.state", "'megatron', 'torch'"]),
    ("", ", replicated_writer: all", ["checkpoint.replicated_writer", "'dp0', 'spread'"]),
    ("", ", dcp_threads: 0", ["checkpoint.dcp_threads", "greater than or equal to 1"]),
    ("", ", dcp_executor: fork", ["checkpoint.dcp_executor", "'thread', 'process'"]),
    ("", ", device: cuda", ["device cuda needs an engine (torch_save or dcp)"]),
    (", device: [cpu, cuda]", "", ["device cuda needs an engine (torch_save or dcp)"]),
])
def test_bad_values_are_one_line_naming_the_key(tmp_path: Path, matrix: str, checkpoint: str,
                                                words: list[str]) -> None:
    path = _sweep(tmp_path, matrix, checkpoint)
    for args in (("plan", str(path)), ("sweep", "submit", str(path), "--results", str(tmp_path / "results"))):
        res = run_cli(*args)
        assert res.returncode == 2, res.stdout + res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert str(path) in lines[0] and all(w in lines[0] for w in words), lines[0]
    assert not (tmp_path / "results").exists()


def _without_torch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """studyctl in a fresh interpreter where `import torch` fails, as on a machine without the extra."""
    blocker = tmp_path / "no_torch"
    blocker.mkdir(parents=True)
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None  # import torch fails\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "studyctl.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_engine_points_refused_without_torch(tmp_path: Path) -> None:
    results = tmp_path / "results"
    path = _sweep(tmp_path, ", engine: [stream, torch_save]")
    for args in (("plan", str(path)), ("sweep", "submit", str(path), "--results", str(results))):
        res = _without_torch(tmp_path / args[0], *args)
        assert res.returncode == 2, res.stdout + res.stderr
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
        assert "checkpoint.engine torch_save needs torch" in res.stderr
        assert "pip install 'studyctl[torch]'" in res.stderr and res.stdout == ""
    assert not results.exists()
    stream_only = _sweep(tmp_path, ", engine: stream, state: torch")
    assert _without_torch(tmp_path / "stream", "plan", str(stream_only)).returncode == 0  # stream needs no torch


def test_a_ceiling_probes_storage_whatever_the_engine() -> None:
    from studyctl.definition.planning.ceilings import ceiling_of

    source = Point(model=LLAMA, zero_stage=1, filesystem="scratch",
                   checkpoint=_opts(engine="dcp", dcp_threads=4, state="torch", replicated_writer="spread"))
    ceiling = ceiling_of(source).checkpoint
    assert (ceiling.engine, ceiling.dcp_threads) == ("stream", 1)
    assert ceiling.convention == source.checkpoint.convention  # the bytes it probes stay the source's


def test_engine_points_asking_for_o_direct_are_infeasible_not_relabelled(tmp_path: Path) -> None:
    """torch.save and DCP write through the page cache: an engine × direct/hybrid point is excluded with the reason;
    the stream points of the same matrix keep every I/O mode."""
    from studyctl.definition.planning.expand import expand
    from studyctl.definition.planning.sweep import load_sweep

    points = expand(load_sweep(_sweep(tmp_path, ", engine: [stream, torch_save, dcp], io_mode: [buffered, direct, "
                                                "hybrid]")))
    measured = [p for p in points if p.point.role == "measure"]
    refused = {(p.point.checkpoint.engine, p.point.io_mode) for p in measured if p.excluded}
    assert refused == {(e, m) for e in ("torch_save", "dcp") for m in ("direct", "hybrid")}
    assert all(f"io_mode {p.point.io_mode}" in p.exclude_reason and "page cache" in p.exclude_reason
               for p in measured if p.excluded)
