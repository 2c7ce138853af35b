"""A point's rank rows kept as JSON text (`results.ranks_text`) read back exactly (`rank_rows`): every value of the
same type, NaN and ±inf kept (never the null orjson would write), None kept, a host named "null" kept, integers
beyond 64 bits kept."""

from __future__ import annotations

import math
from typing import Any

import pytest

from studyctl.analysis.results import rank_rows, ranks_text

NAN, INF = float("nan"), float("inf")
BASE = ("write", 0, 3, "node0", 1089308, 0.0015016504963862721, 0.675588050315722, 2)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("ranks", [
    [BASE + (None,) * 5],
    [(*BASE, 0.1, 0.7, 0.0, 0.01, 1e-9), BASE + (None,) * 5],
    [(*BASE, NAN, 0.7, 0.0, 0.01, 0.0)],
    [(*BASE, None, INF, None, -INF, None)],
    [("read", 1, 0, "null", 2**70, 1.0, 2.0, 1) + (None,) * 5],  # a host called "null", an integer beyond 64 bits
    [("write", 0, 0, 'no"de\\0', 0, 0.0, 0.0, 0) + (None,) * 5],
    [],
], ids=["none", "floats", "nan", "inf", "host-null-bigint", "escapes", "empty"])
def test_rank_rows_read_back_exactly(ranks: list[tuple[Any, ...]]) -> None:
    got = rank_rows({"ranks_json": ranks_text(ranks)})
    assert len(got) == len(ranks)
    for row, want in zip(got, ranks, strict=True):
        assert isinstance(row, list) and len(row) == len(want)
        assert all(_same(w, g) for w, g in zip(want, row, strict=True)), (want, row)


def test_a_nan_written_as_orjson_would_is_caught() -> None:
    """The check can fail: a NaN among Nones still sends the rows to json (its text says NaN, not null)."""
    text = ranks_text([(*BASE, NAN, None, None, None, None)])
    assert "NaN" in text and "null" in text
