"""The worker on a real S3 server (the project's SeaweedFS): one object per DLIO file, request counts per rank,
objects gone afterwards, every strategy and restore mode; a server that stops mid-point is FAILED io_error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from studyctl.definition.catalog import lookup
from studyctl.definition.filesystems import ObjectStoreSpec
from studyctl.definition.layout import rank_files, summarize
from studyctl.definition.objects import read_requests, write_requests
from studyctl.definition.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.result_schema import Result
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.target import S3Target

pytestmark = pytest.mark.s3
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
MIB = 1 << 20


def s3_task(tmp_path: Path, server: Any, world: int = 2, study: str = "s3w", fs_path: str | None = None,
            tier: Path | None = None, **opts: Any) -> tuple[Path, WorkerTask]:
    options = {"scale": 0.02, "writes": 2, "reads": 2, "buffer_mib": 16, "block_mib": 4, "part_mib": 5, **opts}
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=1, ranks_per_node=world, filesystem="objects",
                  checkpoint=CheckpointOptions(**options))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    task = WorkerTask(study=study, point_id=point.point_id, point=point, data_key="k",
                      filesystem_path=fs_path or f"s3://studyctl/{tmp_path.name}", filesystem_kind="s3",
                      object_store=ObjectStoreSpec(endpoint=server.endpoint), tier_path=str(tier) if tier else None,
                      tier_kind="local" if tier else None,
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
