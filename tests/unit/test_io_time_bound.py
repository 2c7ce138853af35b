"""A time-bounded stream (worker.io's stop_ns, the ceiling probe's PROBE_STREAM_S): no block starts after the
stop, the bytes returned are the file's, and an unbounded call moves everything (real files)."""

from __future__ import annotations

import os
from pathlib import Path
from time import perf_counter_ns

import pytest

from worker import io

MIB = 1 << 20


@pytest.mark.parametrize("mode", ["buffered", "direct"])
def test_a_stream_stops_starting_blocks_at_its_time(tmp_path: Path, mode: str) -> None:
    buf = io.Buffer.allocate(4 * MIB)
    path = str(tmp_path / "f")
    try:
        write = io.write_buffered if mode == "buffered" else \
            lambda *a, **k: io.write_direct(a[0], a[1], a[2], a[3], False, **k)
        assert write(path, 8 * MIB + 100, buf, MIB, stop_ns=perf_counter_ns()) == 0  # already past: nothing
        assert os.path.getsize(path) == 0
        whole = 8 * MIB + (100 if mode == "buffered" else 0)
        assert write(path, whole, buf, MIB) == whole == os.path.getsize(path)
        assert io.read_file(path, buf, MIB, mode == "direct", stop_ns=perf_counter_ns()) == 0
        far = perf_counter_ns() + 60 * 10**9
        assert io.read_file(path, buf, MIB, mode == "direct", stop_ns=far) == whole
    finally:
        buf.close()
