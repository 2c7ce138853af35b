"""The worker on a real S3 server (the project's SeaweedFS): one object per DLIO file, request counts per rank,
objects gone afterwards, every strategy and restore mode; a server that stops mid-point is FAILED io_error."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from studyctl.definition.checkpoint.layout import rank_files, summarize
from studyctl.definition.checkpoint.objects import read_requests, write_requests
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.filesystems import ObjectStoreSpec
from studyctl.definition.result.result_schema import Result, WorkerError
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.target import S3Target

pytestmark = pytest.mark.s3
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
MIB = 1 << 20


def s3_task(tmp_path: Path, server: Any, world: int = 2, study: str = "s3w", fs_path: str | None = None,
            tier_dir: Path | None = None, **opts: Any) -> tuple[Path, WorkerTask]:
    options = {"scale": 0.02, "writes": 2, "reads": 2, "buffer_mib": 16, "block_mib": 4, "part_mib": 5, **opts}
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=1, ranks_per_node=world, filesystem="objects",
                  checkpoint=CheckpointOptions(**options))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    task = WorkerTask(study=study, point_id=point.point_id, point=point, data_key="k",
                      filesystem_path=fs_path or f"s3://studyctl/{tmp_path.name}", filesystem_kind="s3",
                      object_store=ObjectStoreSpec(endpoint=server.endpoint),
                      tier_path=str(tier_dir) if tier_dir else None, tier_kind="local" if tier_dir else None,
                      result_path=str(out / "result.json"), error_path=str(out / "error.json"))
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    return path, task


def run_worker(task: Path, ranks: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "worker", str(task)],
                          capture_output=True, text=True, timeout=300, env=env)


def keys_under(server: Any, prefix: str) -> list[str]:
    client = ObjectClient(S3Target("studyctl", endpoint=server.endpoint), 1, 5 * MIB)
    try:
        pages = client.calls.client.get_paginator("list_objects_v2").paginate(Bucket="studyctl", Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]
    finally:
        client.close()


def test_sync_point_counts_requests_and_leaves_nothing(tmp_path: Path, s3_server: Any) -> None:
    task_path, task = s3_task(tmp_path, s3_server)
    proc = run_worker(task_path, 2)
    assert proc.returncode == 0, proc.stderr
    result = Result.model_validate_json(Path(task.result_path).read_text())
    point = result.point
    opts = point.checkpoint
    expected = summarize(point.model, point.parallelism, opts.scale)
    assert result.io.cold_read_method == "no_cache" and result.filesystem.fstype == "s3"
    # the project's local server: its volume files were evicted before the cold restores, and the result says so
    assert result.io.server_cache is not None and "evicted" in result.io.server_cache, result.io.server_cache
    assert s3_server.secret not in Path(task.result_path).read_text()
    for c in result.checkpoints:
        assert c.bytes == expected.total_bytes
        for r in c.ranks:
            assert r.requests is not None and r.split is not None and r.split.fsync_s == 0
            sizes = [f.nbytes for f in rank_files(point.model, point.parallelism, r.rank, opts.scale)]
            want = (write_requests if c.phase == "write" else read_requests)(sizes, opts.part_mib)
            assert (r.requests.put, r.requests.part, r.requests.get) == (want.put, want.part, want.get)
            if c.phase == "read" and want.get:
                assert r.requests.first_byte_s is not None and 0 < r.requests.first_byte_s < r.duration_s
    assert any(r.requests and r.requests.part for c in result.checkpoints for r in c.ranks), \
        "the layout has objects above part_mib: multipart"
    assert keys_under(s3_server, tmp_path.name) == []


@pytest.mark.parametrize(("strategy", "restore"), [("sync", "broadcast"), ("sync", "full"), ("async", "rank"),
                                                   ("tiered", "rank"), ("tiered", "broadcast")])
def test_every_strategy_and_restore_mode_on_objects(tmp_path: Path, s3_server: Any, strategy: str,
                                                    restore: str) -> None:
    opts: dict[str, Any] = {"strategy": strategy, "restore": restore}
    if strategy != "sync":
        opts.update(step_s=0.02, compute="accelerator", allreduce_mib=0.0)
    if strategy == "tiered":
        opts.update(tier="tier", replaced_nodes=1)
    tier = tmp_path / "tier"
    tier.mkdir()
    task_path, task = s3_task(tmp_path, s3_server, world=4, tier_dir=tier if strategy == "tiered" else None, **opts)
    proc = run_worker(task_path, 4)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = Result.model_validate_json(Path(task.result_path).read_text())
    assert result.strategy is not None and result.strategy.strategy == strategy
    for c in result.checkpoints:
        assert c.bytes == (result.sizes.written_checkpoint_bytes if c.phase == "write"
                           else result.sizes.read_bytes_per_restore)
        requests = [r.requests for r in c.ranks if r.requests is not None]
        assert requests, "object requests are recorded per rank"
        kind = "put" if c.phase == "write" else "get"
        assert sum(getattr(r, kind) for r in requests) >= c.files if c.phase == "write" else 1
    assert keys_under(s3_server, tmp_path.name) == []
    assert [p for p in tier.rglob("*") if p.is_file()] == []


def test_objects_larger_than_the_buffer_cycle_through_it(tmp_path: Path, s3_server: Any) -> None:
    """An object of several buffers is sent part by part from the one buffer (memory stays bounded)."""
    task_path, task = s3_task(tmp_path, s3_server, world=1, scale=0.2, buffer_mib=5, block_mib=1, keep=True,
                              writes=1, reads=1)
    proc = run_worker(task_path, 1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = Result.model_validate_json(Path(task.result_path).read_text())
    point = result.point
    files = rank_files(point.model, point.parallelism, 0, point.checkpoint.scale)
    assert max(f.nbytes for f in files) > 2 * 5 * MIB
    keys = keys_under(s3_server, tmp_path.name)
    assert sorted(k.rsplit("/", 1)[1] for k in keys) == sorted(f.name for f in files)
    assert all(f"{tmp_path.name}/s3w.k/{task.point_id}/" in k for k in keys)
    client = ObjectClient(S3Target("studyctl", endpoint=s3_server.endpoint), 1, 5 * MIB)
    try:
        client.delete_prefix(tmp_path.name)
    finally:
        client.close()


def test_a_server_stopped_mid_point_fails_it_with_io_error_and_the_reason(tmp_path: Path,
                                                                         s3_private_server: Any) -> None:
    server = s3_private_server
    task_path, task = s3_task(tmp_path, server, world=2, scale=0.2, writes=8, reads=0)
    worker = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "worker", str(task_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server.env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and worker.poll() is None and not keys_under(server, tmp_path.name):
        time.sleep(0.05)
    server.stop()  # mid-point: the first objects are written, more are on their way
    _, err = worker.communicate(timeout=300)
    assert worker.returncode != 0
    error = WorkerError.model_validate_json(Path(task.error_path).read_text())
    assert error.failure_class == "io_error", error
    assert server.endpoint in error.reason and "\n" not in error.reason
    assert server.secret not in error.reason + err
    assert not Path(task.result_path).exists()
