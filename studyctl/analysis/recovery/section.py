"""The report's "Time to the first training step after a failure" table, declared once: per recovery cell the
parts of a restart, each a mean with its 95% CI, and the layout written and restarted."""

from __future__ import annotations

from typing import Any

from studyctl.analysis.section import Column, Section, size


def _per_rank(r: dict[str, Any]) -> str:
    return f"{size(r['bytes_per_rank_max'])} / {size(r['bytes_per_rank_mean'])}"


def _timed(header: str, key: str, strong: bool = False) -> Column:
    return Column(header, (key, f"{key}_ci95"), "est", strong="html" if strong else "")


RECOVERY = Section("recovery", (
    Column("n", "n"),
    Column("written", "written", "text", align="left"),
    Column("restarted", "restarted", "text", align="left"),
    _timed("launch (s)", "launch_s"),
    _timed("setup (s)", "setup_s"),
    _timed("restore (s)", "restore_s"),
    _timed("ready (s)", "ready_s"),
    _timed("time to first step (s)", "time_to_first_step_s", strong=True),
    _timed("cold-read preparation (s, not counted)", "prepare_s"),
    _timed("same-shape restore (s)", "same_shape_restore_s"),
    Column("bytes per rank max / mean", _per_rank),
    Column("files opened", lambda r: f"{r['files_opened']:.0f}"),
    Column("flags", "flags", "text", align="left", css="flags", bad_when="flags"),
), axes=True, wide=True)
