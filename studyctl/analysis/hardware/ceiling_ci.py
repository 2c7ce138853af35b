"""A ceiling is a distribution: its 95% interval from the rounds its probe ran (`CeilingInfo.rounds`).

Rates spread by factors between rounds on a shared disk, so the interval is taken on the log scale (Student t over
the rounds' logarithms, n − 1 df): it stays positive and is as wide below the figure as a factor as above it. The
figure itself stays the probe's median. A ceiling with fewer than two rounds recorded (results written before
rounds were) has no interval, and says so: no verdict that needs one is drawn from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from studyctl.definition.inputs.tdist import log_interval

NAN = float("nan")
# An even probe not run again (its share within EVEN_SAME of the largest shard) reports the largest's figure: its
# rounds are the largest's.
EVEN_OF = {"even_write_GiBps": "storage_write_GiBps", "even_read_GiBps": "storage_read_GiBps"}
SUFFIXES = ("low", "high", "rounds", "se_log")  # the columns each rate gets: <rate>_<suffix>


def interval(values: Sequence[float]) -> dict[str, float]:
    """rounds (n), low and high of the 95% interval, se_log (the standard error of the mean log rate: the
    relative standard error, which `stats.ratio_ci` propagates into a share); NaN below two rounds."""
    n, low, high, se = log_interval(values)
    return {"rounds": float(n), "low": low, "high": high, "se_log": se}


def _rounds_of(rounds: dict[str, list[float]], row: dict[str, Any], rate: str) -> list[float]:
    got = list(rounds.get(rate) or [])
    base = EVEN_OF.get(rate)
    if not got and base and row.get(rate) == row.get(base):
        got = list(rounds.get(base) or [])
    return got


def round_columns(row: dict[str, Any], rates: Iterable[str]) -> dict[str, Any]:
    """A ceiling row's rounds as plain columns: per rate its interval (`interval`), and every round as JSON text
    in `rounds` (a table cell CSV and Parquet both hold)."""
    raw = row.get("rounds")
    rounds: dict[str, list[float]] = raw if isinstance(raw, dict) else json.loads(raw) if isinstance(raw, str) else {}
    out: dict[str, Any] = {"rounds": json.dumps({k: list(v) for k, v in sorted(rounds.items())})}
    for rate in rates:
        for suffix, value in interval(_rounds_of(rounds, row, rate)).items():
            out[f"{rate}_{suffix}"] = value
    return out


def pooled(rows: Sequence[dict[str, Any]], rates: Iterable[str]) -> dict[str, float]:
    """One shape's interval per rate from every round of its ceiling points (usually one point)."""
    out: dict[str, float] = {}
    for rate in rates:
        values: list[float] = []
        for row in rows:
            values += _rounds_of(json.loads(row.get("rounds") or "{}"), row, rate)
        out.update({f"{rate}_{k}": v for k, v in interval(values).items()})
    return out
