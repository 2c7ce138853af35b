"""The worker end to end under mpiexec: real ranks, real files, results that validate."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from studyctl import host
from studyctl.definition.checkpoint.layout import summarize
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import ModelSpec, lookup
from studyctl.definition.result.result_schema import Result, WorkerError
from studyctl.units import format_bytes
from tests.tmpfs import small_tmpfs as mounted_tmpfs

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
MIB = 1 << 20


def make_task(tmp_path: Path, fs: Path, world: int = 2, io_mode: str = "buffered", zero: int = 1, tp: int = 1,
              pp: int = 1, model: ModelSpec | None = None, **opts: object) -> Path:
    options = {"scale": 0.002, "writes": 2, "reads": 2, "buffer_mib": 4, "block_mib": 1, **opts}
    point = Point(model=model or lookup("gpt2-125m"), zero_stage=zero, tensor_parallel=tp, pipeline_parallel=pp,
                  nodes=1, ranks_per_node=world, filesystem="fs", io_mode=io_mode,
                  checkpoint=CheckpointOptions(**options))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    task = WorkerTask(study="wtest", point_id=point.point_id, attempt=1, point=point, filesystem_path=str(fs),
                      result_path=str(out / "result.json"), error_path=str(out / "error.json"))
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    return path


def run_worker(task: Path, ranks: int) -> subprocess.CompletedProcess:
    return subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "worker", str(task)],
                          capture_output=True, text=True, timeout=300)


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.mark.parametrize("io_mode", ["buffered", "direct", "hybrid"])
@pytest.mark.parametrize(("ranks", "zero", "tp", "pp"), [(2, 1, 1, 1), (4, 3, 2, 1), (4, 1, 1, 2)])
def test_worker_end_to_end(tmp_path: Path, io_mode: str, ranks: int, zero: int, tp: int, pp: int) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=ranks, io_mode=io_mode, zero=zero, tp=tp, pp=pp)
    proc = run_worker(task, ranks)
    assert proc.returncode == 0, proc.stderr
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    point = result.point
    expected = summarize(point.model, point.parallelism, point.checkpoint.scale)
    assert result.sizes.written_checkpoint_bytes == expected.total_bytes
    assert result.sizes.nominal_checkpoint_bytes == summarize(point.model, point.parallelism).total_bytes
    writes = [c for c in result.checkpoints if c.phase == "write"]
    reads = [c for c in result.checkpoints if c.phase == "read"]
    assert len(writes) == 2 and len(reads) == 2
    for c in writes:
        assert c.bytes == expected.total_bytes and c.files == expected.files_per_checkpoint
        assert len(c.ranks) == ranks and sum(r.bytes for r in c.ranks) == c.bytes
        assert c.aggregate_GiBps > 0 and c.span_s >= c.duration_max_s * 0.999
    for c in reads:
        assert c.bytes == result.sizes.read_bytes_per_restore == expected.total_bytes
    assert result.io.io_mode_used == io_mode
    assert result.io.cold_read_method == ("fadvise" if io_mode == "buffered" else "direct")
    assert result.provenance.world_size == ranks and result.provenance.simulated_nodes
    assert result.provenance.memory_return == host.memory_return()  # this host's, as its kernel says
    assert result.filesystem.fstype and result.filesystem.mount_point
    assert result.dlio.save_checkpoint_io_mean_GB_per_second > 0
    assert result.summary["write"].checkpoints == 2
    assert files_under(fs) == [], "checkpoint files must be removed"


def test_restore_full_and_rank_shift(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=4, zero=1, restore="full", rank_shift=2)
    proc = run_worker(task, 4)
    assert proc.returncode == 0, proc.stderr
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    # every DP replica reads the weights: 3 extra copies of the model files for DP = 4
    model_bytes = summarize(result.point.model, result.point.parallelism, 0.002).model_bytes
    assert result.sizes.read_bytes_per_restore == result.sizes.written_checkpoint_bytes + 3 * model_bytes
    assert result.io.restore_mode == "full" and result.io.rank_shift == 2


def test_keep_leaves_files(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, keep=True, reads=0, writes=3)
    assert run_worker(task, 2).returncode == 0
    kept = files_under(fs)
    assert kept and all("global_epoch1_step" in str(p) for p in kept)
    assert {p.parent.name for p in kept} == {"global_epoch1_step1", "global_epoch1_step2", "global_epoch1_step3"}
    point_dirs = {p.parent.parent for p in kept}
    assert len(point_dirs) == 1 and point_dirs.pop().parent == fs / "wtest"


@pytest.mark.parametrize("io_mode", ["buffered", "direct"])
def test_no_two_written_pages_are_equal(tmp_path: Path, io_mode: str) -> None:
    """The reused buffer must not write the same page twice (deduplicating storage would flatter us),
    across chunks, files, ranks and checkpoints."""
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, io_mode=io_mode, keep=True, reads=0, writes=2, buffer_mib=1, block_mib=1)
    assert run_worker(task, 2).returncode == 0
    kept = files_under(fs)
    pages: set[bytes] = set()
    count = 0
    for path in kept:
        data = path.read_bytes()
        for off in range(0, len(data) - len(data) % 4096, 4096):
            pages.add(hashlib.blake2b(data[off:off + 4096], digest_size=16).digest())
            count += 1
    assert len({p.parent.name for p in kept}) == 2 and count > 4 * 256  # several buffer cycles per checkpoint
    assert len(pages) == count


def test_world_size_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=4)
    proc = run_worker(task, 2)
    assert proc.returncode != 0
    assert "MPI world has 2 rank(s)" in proc.stderr and "--mpi" in proc.stderr
    err = WorkerError.model_validate_json((tmp_path / "out" / "error.json").read_text())
    assert err.failure_class == "world_size_mismatch"
    assert files_under(fs) == []


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path, "16m") as mnt:
        yield mnt


def test_insufficient_space_refused_up_front(tmp_path: Path, small_tmpfs: Path) -> None:
    task = make_task(tmp_path, small_tmpfs, scale=0.05)  # ~83 MiB per checkpoint on a 16 MiB disk
    proc = run_worker(task, 2)
    assert proc.returncode == 3
    err = json.loads((tmp_path / "out" / "error.json").read_text())
    assert err["failure_class"] == "insufficient_space"
    assert "need" in err["reason"] and str(small_tmpfs) in err["reason"]
    assert re.search(r"have [0-9.]+ [KMG]iB free", err["reason"])
    assert files_under(small_tmpfs) == []


def test_disk_full_mid_run_is_io_error_and_cleaned(tmp_path: Path, small_tmpfs: Path) -> None:
    # The pre-check counts bytes; tmpfs allocates whole 4 KiB pages per file. Leave exactly enough bytes
    # (not pages) for the two kept checkpoints: the check passes and a write hits ENOSPC near the end.
    task = make_task(tmp_path, small_tmpfs, scale=0.002, writes=2, reads=2, free_space_margin=0.0)
    point = WorkerTask.model_validate_json(task.read_text()).point
    par = point.parallelism
    from studyctl.definition.checkpoint.layout import rank_files

    sizes = [f.nbytes for r in range(par.world_size) for f in rank_files(point.model, par, r, 0.002)]
    need = 2 * sum(sizes)
    pages_needed = 2 * sum(-(-n // 4096) for n in sizes)
    free_pages = -(-need // 4096)
    assert free_pages < pages_needed
    filler = small_tmpfs / "filler"
    claim_pages = 1  # the worker's claim file (a line of text) takes one page before the check
    filler.write_bytes(b"\1" * ((4096 - free_pages - claim_pages) * 4096))
    proc = run_worker(task, 2)
    filler.unlink()
    assert proc.returncode == 3, proc.stderr
    err = json.loads((tmp_path / "out" / "error.json").read_text())
    assert err["failure_class"] == "io_error"
    assert "no space left" in err["reason"] and str(small_tmpfs) in err["reason"]
    assert files_under(small_tmpfs) == []


@pytest.fixture
def ramfs(tmp_path: Path):
    """ramfs refuses O_DIRECT (EINVAL at open); tmpfs accepts it on kernels >= 6.6."""
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_direct_refused_and_fallback(tmp_path: Path, ramfs: Path) -> None:
    task = make_task(tmp_path, ramfs, io_mode="direct")
    proc = run_worker(task, 2)
    assert proc.returncode == 3
    err = json.loads((tmp_path / "out" / "error.json").read_text())
    assert err["failure_class"] == "direct_io_refused" and "ramfs" in err["reason"]
    assert "direct_fallback" in err["reason"]
    assert files_under(ramfs) == []

    task = make_task(tmp_path, ramfs, io_mode="direct", direct_fallback=True)
    proc = run_worker(task, 2)
    assert proc.returncode == 0, proc.stderr
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    assert result.io.io_mode_requested == "direct" and result.io.io_mode_used == "buffered"
    assert "O_DIRECT refused" in result.io.direct_fallback_reason
    assert result.io.cold_read_method == "fadvise"


def test_free_space_margin_is_part_of_the_need(tmp_path: Path, small_tmpfs: Path) -> None:
    # Two checkpoints of ~5 MiB fit the 16 MiB disk, but not with a 100% margin on top: refused, numbers named.
    task = make_task(tmp_path, small_tmpfs, scale=0.003, free_space_margin=1.0)
    point = WorkerTask.model_validate_json(task.read_text()).point
    need = 2 * summarize(point.model, point.parallelism, 0.003).total_bytes
    assert need < 16 * MIB < 2 * need
    proc = run_worker(task, 2)
    assert proc.returncode == 3, proc.stderr
    err = WorkerError.model_validate_json((tmp_path / "out" / "error.json").read_text())
    assert err.failure_class == "insufficient_space"
    assert f"need {format_bytes(2 * need, 3)}" in err.reason and "100% margin" in err.reason
    assert files_under(small_tmpfs) == [] and not (small_tmpfs / "wtest" / point.point_id).exists()


def test_off_clock_failure_is_voted_and_cleaned(tmp_path: Path) -> None:
    # A file where a step directory must go: every rank's mkdir fails before the clock starts; all ranks
    # agree on io_error (none hangs in a barrier) and the point directory is removed.
    fs = tmp_path / "fs"
    task = make_task(tmp_path, fs)
    point_id = WorkerTask.model_validate_json(task.read_text()).point_id
    blocker = fs / "wtest" / point_id / "global_epoch1_step2"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a directory")
    proc = run_worker(task, 2)
    assert proc.returncode == 3, proc.stderr
    err = WorkerError.model_validate_json((tmp_path / "out" / "error.json").read_text())
    assert err.failure_class == "io_error" and "global_epoch1_step2" in err.reason
    assert not (tmp_path / "out" / "result.json").exists()
    assert files_under(fs) == []


CRASH_ON_RANK_1 = """
import sys
from mpi4py import MPI
import worker.run as run

real = run.read_files
def crashing(*args, **kwargs):
    if MPI.COMM_WORLD.Get_rank() == 1:
        raise RuntimeError("injected bug")
    return real(*args, **kwargs)
run.read_files = crashing
run.run_task(sys.argv[1])
"""


def test_unexpected_exception_on_one_rank_aborts_all(tmp_path: Path) -> None:
    # A bug on rank 1 while rank 0 waits in the closing collective: recorded, files removed, job aborted.
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs)
    script = tmp_path / "crash.py"
    script.write_text(CRASH_ON_RANK_1)
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script), str(task)], capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert proc.returncode != 0
    err = WorkerError.model_validate_json((tmp_path / "out" / "error.json").read_text())
    assert err.failure_class == "worker_crash" and "rank 1: RuntimeError: injected bug" in err.reason
    assert files_under(fs) == []
