"""The residency sample (worker.residency): mincore over real files on this machine's disk, before and after the
eviction a cold read makes."""

from __future__ import annotations

from pathlib import Path

from worker import io, residency


def _written(path: Path, nbytes: int) -> str:
    buf = io.Buffer.allocate(1 << 20)
    try:
        io.write_buffered(str(path), nbytes, buf, 1 << 20, fsync=True)
    finally:
        buf.close()
    return str(path)


def test_a_file_just_written_is_resident_and_an_evicted_one_is_not(tmp_path: Path) -> None:
    one, two = _written(tmp_path / "a", 8 << 20), _written(tmp_path / "b", 3 << 20)
    pages = (8 << 20) // residency.PAGE + (3 << 20) // residency.PAGE
    resident, sampled = residency.resident([one, two, one]) or (-1, -1)  # a file named twice is sampled once
    assert sampled == pages and resident == pages  # small files: every page asked, all of them cached
    io.evict(one)
    io.evict(two)
    assert residency.resident([one, two]) == (0, pages)


def test_a_large_file_is_sampled_within_the_bound(tmp_path: Path) -> None:
    path = _written(tmp_path / "big", 64 << 20)  # 16384 pages of 4 KiB
    got = residency.resident([path])
    assert got is not None and got[1] == residency.SAMPLE_PAGES and got[0] == got[1]
    io.evict(path)
    assert residency.resident([path]) == (0, residency.SAMPLE_PAGES)


def test_pages_are_spread_over_the_file_and_unknown_ranks_make_the_sum_unknown(tmp_path: Path) -> None:
    assert residency.sample_pages(10, 20) == list(range(10))
    spread = residency.sample_pages(1000, 4)
    assert spread == [0, 250, 500, 750]
    assert residency.total([(1, 8), (0, 8)]) == (1, 16)
    assert residency.total([(1, 8), None]) is None
    assert residency.resident([str(tmp_path / "missing")]) is None  # nothing to ask: unknown, not cold
    empty = tmp_path / "empty"
    empty.touch()
    assert residency.resident([str(empty)]) == (0, 0)
