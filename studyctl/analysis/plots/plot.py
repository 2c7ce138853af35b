"""A declared plot: what it shows and where its PNG is (the report lists these, never file names)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Plot:
    kind: str  # bandwidth | duration | efficiency | rank_spread | axis_bars | ratio | compare | overhead | ...
    title: str
    path: Path
