"""The chunk sequence a resharded restore reads (and a broadcast group sends): every requested byte exactly once,
in order, in chunks no larger than the block; under O_DIRECT aligned reads, each 4 KiB block read once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from studyctl.definition.checkpoint.reshard import ByteRange
from worker.io import ALIGN
from worker.reshard_read import read_sequence


@st.composite
def file_ranges(draw: st.DrawFn) -> list[ByteRange]:
    """Sorted, disjoint, non-touching ranges of one file (as the reshard map gives them)."""
    out, at = [], draw(st.integers(0, 3 * ALIGN))
    for _ in range(draw(st.integers(1, 8))):
        length = draw(st.integers(1, 5 * ALIGN))
        out.append(ByteRange("f.pt", "model", at, length))
        at += length + draw(st.integers(1, 3 * ALIGN))
    return out


@given(ranges=file_ranges(), direct=st.booleans(), blocks=st.integers(1, 4))
def test_every_requested_byte_once_in_order(ranges: list[ByteRange], direct: bool, blocks: int) -> None:
    block = blocks * ALIGN
    delivered: list[int] = []
    read: list[int] = []
    for off, length, kept in read_sequence(ranges, block, direct):
        assert 0 < length <= block
        read += range(off, off + length)
        if direct:
            assert off % ALIGN == 0 and length % ALIGN == 0
        for r, lo, hi in kept:
            assert 0 <= lo < hi <= length and r.offset <= off + lo and off + hi <= r.end
            delivered += range(off + lo, off + hi)
    assert delivered == [b for r in ranges for b in range(r.offset, r.end)]
    assert len(read) == len(set(read)), "no byte read twice"
    touched = {b // ALIGN for r in ranges for b in range(r.offset, r.end)}
    assert (len(read) == len(touched) * ALIGN) if direct else (len(read) == len(delivered))
