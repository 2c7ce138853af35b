"""Small facts about table values every analysis module agrees on: what counts as missing, safe file stems."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def missing(x: Any) -> bool:
    """None, pandas' NA or NaN: a setting left unset or a figure not measured."""
    return x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x))


def file_stem(name: str) -> str:
    """`name` as part of a file name: letters, digits, '-', '_' and '.' kept, anything else '_'."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
