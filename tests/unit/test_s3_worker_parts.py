"""The worker's pieces for objects that need no server: parts cycling through the rank's one buffer, request
counts carried from the ranks' stamps into the result, and the tables' request columns."""

from __future__ import annotations

from studyctl.analysis.results import REQUEST_COLUMNS, request_columns
from studyctl.objstore.counts import RequestCounts
from worker.objects import cycling
from worker.timing import checkpoint_timing

MIB = 1 << 20


def test_parts_cycle_through_the_buffer_slots_and_stay_inside_it() -> None:
    raw = bytearray(3 * MIB + 123)  # room for 3 parts of 1 MiB (the tail is never used)
    for slot in range(3):
        raw[slot * MIB:(slot + 1) * MIB] = bytes([slot]) * MIB
    chunk = cycling(memoryview(raw), MIB)
    for k in range(8):
        piece = chunk(k * MIB, MIB)
        assert len(piece) == MIB and piece[0] == piece[-1] == k % 3  # part k is slot k mod 3, whole
    assert len(chunk(7 * MIB, 5)) == 5  # the last, short part


def test_request_counts_travel_from_the_stamps_into_the_result_and_the_tables() -> None:
    stamps = [(0, "h", 10.0, 12.0, 100, 1, None), (1, "h", 10.0, 11.0, 50, 1, None)]
    counts = {0: RequestCounts(put=2, part=3, retries=1, first_byte_s=0.02), 1: RequestCounts(put=1, throttled=2)}
    timing = checkpoint_timing("write", 0, "step", stamps, counts)
    by_rank = {r.rank: r.requests for r in timing.ranks}
    assert by_rank[0] is not None and (by_rank[0].put, by_rank[0].part, by_rank[0].first_byte_s) == (2, 3, 0.02)
    columns = request_columns(timing)
    assert set(columns) == set(REQUEST_COLUMNS)
    assert (columns["requests_put"], columns["requests_part"], columns["requests_retries"],
            columns["requests_throttled"], columns["first_byte_s_max"]) == (3, 3, 1, 2, 0.02)
    posix = checkpoint_timing("write", 0, "step", stamps)
    assert all(r.requests is None for r in posix.ranks) and request_columns(posix) == {}
