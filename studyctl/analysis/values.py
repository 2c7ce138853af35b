"""Small facts about table values every analysis module agrees on: what counts as missing, safe file stems."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pandas as pd


def missing(x: Any) -> bool:
    """None, pandas' NA or NaN: a setting left unset or a figure not measured."""
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


STEM_MAX = 80  # characters: with a prefix and suffix well under the 255 bytes a file name may have


def file_stem(name: str) -> str:
    """`name` as part of a file name: ASCII letters, digits, '-', '_' and '.' kept, anything else '_'; a long
    name cut, with a hash of the whole so two long names never share a file."""
    stem = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "-_." else "_" for ch in name)
    if len(stem) <= STEM_MAX:
        return stem
    return f"{stem[:STEM_MAX - 13]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"
