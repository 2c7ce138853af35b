"""The POSIX storage on real files: the engines' streams (torch.save / torch.load round trip, fsync on close as
the point asks, a failed write leaving no file), list_step, step_path, and the phase split the streams feed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from tests import storage_streams as checks
from worker import io
from worker.storage import open_storage
from worker.storage.posix import PosixStorage, local_read_stream, read_buffer

MIB = 1 << 20


def storage(tmp_path: Path, **opts: object) -> PosixStorage:
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=1, ranks_per_node=1, filesystem="fs",
                  checkpoint=CheckpointOptions(scale=0.01, buffer_mib=4, block_mib=1, **opts))
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    task = WorkerTask(study="st", point_id=point.point_id, point=point, filesystem_path=str(fs),
                      result_path=str(tmp_path / "result.json"), error_path=str(tmp_path / "error.json"))
    chosen = open_storage(task, 0)
    assert isinstance(chosen, PosixStorage)
    setup = chosen.decide(0)
    assert setup.error is None, setup.error
    chosen.use(setup)
    return chosen


def test_torch_save_into_a_stream_loads_back(tmp_path: Path) -> None:
    s = storage(tmp_path)
    size = checks.torch_round_trip(s, "mp_rank_00_model_states.pt", 6)
    assert size == (s.step_path(checks.STEP) / "mp_rank_00_model_states.pt").stat().st_size > 6 * MIB


def test_raw_bytes_and_seeks_through_the_streams(tmp_path: Path) -> None:
    checks.raw_round_trip(storage(tmp_path), "raw.bin", 7 * MIB + 5)


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    s = storage(tmp_path)
    checks.failed_write_leaves_nothing(s, "half.pt", 3 * MIB)
    assert not (s.step_path(checks.STEP) / "half.pt").exists()


def test_a_buffer_written_file_reads_back_whole(tmp_path: Path) -> None:
    checks.buffer_file_round_trip(storage(tmp_path), 5 * MIB + 17)


@pytest.mark.parametrize("fsync", [True, False])
def test_the_write_stream_fsyncs_on_close_as_the_point_says(tmp_path: Path, fsync: bool) -> None:
    """Where the point fsyncs, closing the stream fsyncs the file (time in the split's fsync part, and never
    where it does not); the stream's writes are the split's transfer."""
    s = storage(tmp_path, fsync=fsync)
    s.prepare_step(checks.STEP)
    split = io.Split()
    with s.open_write(checks.STEP, "a.distcp", split) as out:
        out.write(b"x" * (3 * MIB))
    assert (split.fsync_ns > 0) is fsync  # an fsync call is timed in ns: never 0 where one was made
    assert split.transfer_ns > 0 and split.open_ns > 0 and split.close_ns > 0


def test_list_step_names_what_an_engine_wrote(tmp_path: Path) -> None:
    """DCP names its own files: the listing is every regular file of the step, by name, with its size."""
    s = storage(tmp_path)
    s.prepare_step(checks.STEP)
    for name, n in (("__1_0.distcp", 10), ("__0_0.distcp", 20), (".metadata", 3)):
        with s.open_write(checks.STEP, name) as out:
            out.write(b"a" * n)
    (s.step_path(checks.STEP) / "sub").mkdir()
    assert s.list_step(checks.STEP) == [(".metadata", 3), ("__0_0.distcp", 20), ("__1_0.distcp", 10)]


def test_make_cold_names_follows_the_cold_read_method(tmp_path: Path) -> None:
    """fadvise points evict what they name (files written without fsync are flushed first); others leave the
    page cache alone (O_DIRECT reads bypass it; `none` asks for warm reads)."""
    s = storage(tmp_path, fsync=False)
    s.prepare_step(checks.STEP)
    with s.open_write(checks.STEP, "f.pt") as out:
        out.write(b"z" * (2 * MIB))
    s.make_cold(checks.STEP, ["f.pt"])  # fadvise (buffered, cold_read auto): flushed and evicted, no error
    s.cold_read = "none"
    s.make_cold(checks.STEP, ["missing.pt"])  # nothing asked of the file system: no error for a missing file
    s.cold_read = "fadvise"
    with pytest.raises(FileNotFoundError):
        s.make_cold(checks.STEP, ["missing.pt"])


def test_the_read_stream_reads_as_open_does(tmp_path: Path) -> None:
    """torch.load(path) reads through `open(path, "rb")`: the engine's stream fills the same buffer from its file
    (not the point's I/O block: 1 MiB here), and a record larger than the buffer is read straight into its
    destination, nothing read ahead of it."""
    path = tmp_path / "f"
    path.write_bytes(os.urandom(4 * MIB))
    split = io.Split()
    with open(path, "rb") as plain, local_read_stream(str(path), split) as ours:
        assert plain.read(10) == ours.read(10)
        fd = ours.raw.fd  # type: ignore[attr-defined]  # a BufferedReader over the timed raw stream
        assert os.lseek(fd, 0, os.SEEK_CUR) == os.lseek(plain.fileno(), 0, os.SEEK_CUR) == read_buffer(fd) < MIB
        record = bytearray(2 * MIB)
        assert ours.readinto(record) == 2 * MIB and record == path.read_bytes()[10:10 + 2 * MIB]
        assert os.lseek(fd, 0, os.SEEK_CUR) == 10 + 2 * MIB, "the record straight from the file, no read-ahead"
