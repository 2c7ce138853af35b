"""Per-rank time split: the accounting from a rank's summed parts, and the io calls that sum them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from worker import io
from worker.timing import checkpoint_timing, rank_split

MIB = 1 << 20


def test_other_is_the_duration_left_after_the_four_parts() -> None:
    split = rank_split(2.0, (0.25, 1.0, 0.5, 0.125))
    assert (split.open_s, split.transfer_s, split.fsync_s, split.close_s) == (0.25, 1.0, 0.5, 0.125)
    assert split.other_s == pytest.approx(0.125)


def test_other_is_floored_at_zero_when_the_parts_fill_the_duration() -> None:
    split = rank_split(1.0, (0.0, 1.0, 0.0, 1e-9))
    assert split.other_s == 0.0 and split.transfer_s == 1.0


def test_checkpoint_timing_carries_each_ranks_split_or_none() -> None:
    stamps = [(1, "h", 10.0, 13.0, 300, 3, None),
              (0, "h", 10.5, 12.5, 200, 2, (0.1, 1.5, 0.3, 0.05))]
    timing = checkpoint_timing("write", 0, "step", stamps)
    first, second = timing.ranks
    assert (first.rank, second.rank) == (0, 1)
    assert first.split is not None and first.split.other_s == pytest.approx(2.0 - 1.95)
    assert second.split is None
    assert timing.bytes == 500 and timing.files == 5


def test_split_sums_over_files_and_stays_within_the_wall_clock(tmp_path: Path) -> None:
    buf = io.Buffer.allocate(4 * MIB)
    buf.stamp(1)
    split = io.Split()
    try:
        begin = time.perf_counter()
        for i in range(3):
            io.write_buffered(str(tmp_path / f"f{i}"), MIB + 123, buf, MIB, fsync=True, split=split)
        wall = time.perf_counter() - begin
        after_writes = split.seconds()
        assert all(p > 0 for p in after_writes), after_writes
        assert sum(after_writes) <= wall
        io.write_buffered(str(tmp_path / "f3"), MIB, buf, MIB, fsync=True, split=split)
        assert all(b >= a for a, b in zip(after_writes, split.seconds(), strict=True))  # summed, never reset
    finally:
        buf.close()


def test_a_write_without_fsync_and_a_read_have_no_fsync_time(tmp_path: Path) -> None:
    buf = io.Buffer.allocate(4 * MIB)
    buf.stamp(2)
    path = str(tmp_path / "f")
    try:
        write = io.Split()
        io.write_buffered(path, 3 * MIB, buf, MIB, fsync=False, split=write)
        assert write.fsync_ns == 0 and write.transfer_ns > 0 and write.open_ns > 0
        read = io.Split()
        begin = time.perf_counter()
        assert io.read_file(path, buf, MIB, direct=False, split=read) == 3 * MIB
        wall = time.perf_counter() - begin
        assert read.fsync_ns == 0 and read.transfer_ns > 0 and read.open_ns > 0 and read.close_ns > 0
        assert sum(read.seconds()) <= wall
    finally:
        buf.close()


def test_a_failed_open_still_counts_its_time(tmp_path: Path) -> None:
    split = io.Split()
    with pytest.raises(FileNotFoundError):
        split.open(str(tmp_path / "missing" / "f"), 0)
    assert split.open_ns > 0 and split.transfer_ns == split.fsync_ns == split.close_ns == 0
