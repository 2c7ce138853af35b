"""Restores record the pages resident in the page cache right before the read (worker.residency), on real
mpiexec ranks and real files: a cold read 0 of what it sampled, a read of files just written without eviction
more than 0; writes record nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.definition.result.result_schema import Result
from tests.integration.test_worker import make_task, run_worker


def _reads(tmp_path: Path, ranks: int, io_mode: str = "buffered", **opts: object) -> list:
    fs = tmp_path / "fs"
    fs.mkdir()
    proc = run_worker(make_task(tmp_path, fs, world=ranks, io_mode=io_mode, **opts), ranks)
    assert proc.returncode == 0, proc.stderr
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    assert all(c.resident_pages_before is None and c.pages_sampled is None
               for c in result.checkpoints if c.phase == "write")
    reads = [c for c in result.checkpoints if c.phase == "read"]
    assert len(reads) == 2 and all(c.pages_sampled for c in reads)
    return reads


@pytest.mark.parametrize(("io_mode", "opts"), [
    ("buffered", {}),  # evicted (fadvise) after the fsynced write
    ("direct", {}),  # O_DIRECT writes leave nothing in the page cache
    ("buffered", {"restore": "broadcast"}),  # the restorer's reads (one per replica group, then broadcast)
])
def test_a_cold_restore_records_no_page_resident(tmp_path: Path, io_mode: str, opts: dict) -> None:
    for c in _reads(tmp_path, 4, io_mode, **opts):
        assert c.resident_pages_before == 0


def test_a_restore_of_files_just_written_without_eviction_records_them_resident(tmp_path: Path) -> None:
    for c in _reads(tmp_path, 2, cold_read="none"):
        assert c.resident_pages_before is not None and c.pages_sampled is not None
        assert 0 < c.resident_pages_before <= c.pages_sampled


@pytest.mark.parametrize("opts", [
    {"strategy": "tiered", "replaced_nodes": 1},  # the restorer's tier copies and shared storage's files
    {"engine": "torch_save"},  # an engine's files, through its streams
    {"engine": "dcp", "restore": "rank"},  # DCP's directory (every file its records are in)
])
def test_every_restore_path_records_a_cold_read_as_cold(tmp_path: Path, opts: dict) -> None:
    from tests.integration.test_strategies import run_point

    result = run_point(tmp_path, **opts)
    reads = [c for c in result.checkpoints if c.phase == "read"]
    assert reads and all(c.resident_pages_before == 0 and c.pages_sampled for c in reads)


@pytest.mark.parametrize("recovery", [{"grow_to": 8}, {"lost_nodes": 1}])  # resharded; same shape, tiered
def test_a_restart_records_its_cold_read(tmp_path: Path, recovery: dict) -> None:
    from tests.integration.test_recovery import make_task, relaunch

    opts = {"strategy": "tiered"} if "lost_nodes" in recovery else {}
    task, _ = make_task(tmp_path, recovery, tp=1 if opts else 2, zero=3, **opts)
    proc = relaunch(task)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    restart = [c for c in result.checkpoints if c.phase == "read"][-1]  # the restarted world's restore
    assert restart.resident_pages_before == 0 and restart.pages_sampled
