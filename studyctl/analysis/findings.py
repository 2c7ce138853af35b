"""What a collect found wrong with a study's files: plain records, light to import (a collect with nothing new
rebuilds them from its manifest without loading the analysis stack)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Problem:
    """A result file that could not be used (or a result that should exist and does not)."""

    point_id: str
    attempt: int | None
    path: str
    reason: str


@dataclass
class Failure:
    """A worker error record (error.json) on the point's latest attempt with no usable result."""

    point_id: str
    attempt: int
    failure_class: str
    reason: str
