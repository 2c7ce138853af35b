"""Byte units and how sizes are shown: one place, so every table, plot and message agrees.

Binary units throughout (GiB = 2^30 B), as in every `_GiBps` and `_bytes` field; MLPerf's decimal
GB (10^9 B) is named `GB` where it is used.
"""

from __future__ import annotations

import math
from typing import Any

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40
GB = 10**9

_STEPS = (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB))


def format_bytes(n: Any, digits: int = 2, missing: str = "-") -> str:
    """`1.50 GiB`; `missing` for a missing value (None or NaN)."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return missing
    n = float(n)
    for unit, size in _STEPS:
        if abs(n) >= size:
            return f"{n / size:.{digits}f} {unit}"
    return f"{n:.0f} B"
