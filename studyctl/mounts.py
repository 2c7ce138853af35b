"""Which mount a path is on, from /proc/self/mountinfo: the worker records it, the MLPerf view compares two.

A kernel module (no studyctl imports) so the worker and analysis share it without analysis importing the worker.
"""

from __future__ import annotations

import os
from pathlib import Path


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mount_of(path: str) -> dict[str, str]:
    """The /proc/self/mountinfo entry with the longest mount point that contains `path`."""
    real = os.path.realpath(path)
    best: dict[str, str] = {"mount_point": "/", "fstype": "unknown", "source": "unknown", "mount_options": ""}
    best_len = -1
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 2:
            continue
        point = _unescape(fields[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            best_len = len(point)
            options = fields[5] + ("," + tail[2] if len(tail) > 2 else "")
            best = {"mount_point": point, "fstype": tail[0], "source": _unescape(tail[1]), "mount_options": options}
    return best
