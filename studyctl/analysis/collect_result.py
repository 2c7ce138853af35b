"""What a collect produced and found: its own module so that `collect` (the cheap nothing-new path) and
`collect_outputs` (the analysis stack) both use it without importing each other."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studyctl.analysis.findings import Failure, Problem
from studyctl.analysis.plots import Plot
from studyctl.analysis.status import PointStatus
from studyctl.attempt.paths import StudyPaths
from studyctl.states import NOT_FAILED, State


@dataclass
class CollectResult:
    """What a collect produced and found; `unchanged` when nothing was redone."""

    study: str
    study_dir: Path
    unchanged: bool
    points: int = 0  # measure points with a valid result in the tables (ceiling and calibration points apart)
    cells: int = 0  # summary rows (cell × phase)
    completed: int | None = None  # from the statuses handed in (None: no statuses)
    failed: int | None = None
    tables: dict[str, list[Path]] = field(default_factory=dict)  # declared name (or ratio's) → its CSV and Parquet
    plot_sets: dict[str, list[Plot]] = field(default_factory=dict)  # declared name → the plots it drew
    skipped_plots: list[str] = field(default_factory=list)
    ratios: list[str] = field(default_factory=list)  # one line per ratio, e.g. "direct / buffered write: 1.70× [..]"
    report_html: Path | None = None
    report_md: Path | None = None
    problems: list[Problem] = field(default_factory=list)  # invalid, truncated or missing results
    failures: list[Failure] = field(default_factory=list)  # worker error records (error.json)
    files_read: int = 0  # result files parsed and validated this time
    files_cached: int = 0  # result files taken from the parse cache
    # results of points the sweep now excludes, or that studyctl added for a shape it no longer measures: not cells
    left_out: list[str] = field(default_factory=list)
    hardware: list[str] = field(default_factory=list)  # per cell × phase: its share of the ceiling and its limit

    @property
    def plots(self) -> list[Plot]:
        """Every plot drawn, in declared order (the report's)."""
        return [p for drawn in self.plot_sets.values() for p in drawn]

    def output_files(self) -> list[Path]:
        """Every file this collect wrote that a later one may keep: the report, the tables, the plots."""
        return [p for p in (self.report_html, self.report_md) if p is not None] + [
            p for written in self.tables.values() for p in written] + [p.path for p in self.plots]

    @property
    def tables_dir(self) -> Path:
        return StudyPaths(self.study_dir).tables

    def summary_lines(self) -> list[str]:
        """Plain lines for the CLI."""
        how = (" (nothing new since the last collect)" if self.unchanged else
               f"; validated {self.files_read} result files, {self.files_cached} unchanged from cache")
        states = "" if self.completed is None else f"{self.completed} completed, {self.failed} failed; "
        lines = [f"study {self.study}: {states}{self.points} points collected into {self.cells} cell×phase "
                 f"rows{how}"]
        lines += [f"  unusable result: {p.point_id}: {p.reason}" if p.attempt is None else
                  f"  unusable result: point {p.point_id} attempt {p.attempt}: {p.reason}" for p in self.problems]
        lines += [f"  worker error: point {f.point_id} attempt {f.attempt}: {f.failure_class}: {f.reason}"
                  for f in self.failures]
        if self.left_out:
            lines.append(f"  left out: {len(self.left_out)} result(s) of points the sweep now excludes (or added "
                         "for a shape it no longer measures)")
        if self.failed:
            lines.append(f"  rerun the failed points: studyctl sweep resubmit {self.study}")
        lines += [f"  plot skipped: {s}" for s in self.skipped_plots]
        lines += [f"ratio: {r}" for r in self.ratios]
        lines += [f"hardware: {h}" for h in self.hardware]
        lines.append(f"tables: {self.tables_dir}")
        lines += [f"plot: {p.path}" for p in self.plots]
        lines.append(f"report: {self.report_html}")
        lines.append(f"report (Markdown): {self.report_md}")
        return lines



def state_counts(statuses: Sequence[PointStatus] | None) -> tuple[int | None, int | None]:
    if statuses is None:
        return None, None
    return (sum(1 for s in statuses if s.state == State.COMPLETED.value and not s.excluded),
            sum(1 for s in statuses if s.state not in NOT_FAILED and not s.excluded))


# Fields of the study, not of what the collect made: handed in again when a manifest is read.
_NOT_SAVED = ("study", "study_dir", "unchanged")


def _encode(value: Any, root: Path) -> Any:
    """Paths relative to the study folder: a study moved or copied elsewhere names its own files, not the ones it
    was collected from."""
    if isinstance(value, Path):
        return os.path.relpath(value, root)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name), root) for f in dataclasses.fields(value)}
    if isinstance(value, dict):  # as pairs: the order is the declared one, and JSON may be written key-sorted
        return [[k, _encode(v, root)] for k, v in value.items()]
    if isinstance(value, list):
        return [_encode(v, root) for v in value]
    return value


def _decode(kind: Any, value: Any, root: Path) -> Any:
    """`value` read back as `kind` (a field's type hint): paths, declared records, their lists and mappings. A path
    that would leave the study folder (absolute, or through '..': a manifest is data from whoever wrote the study)
    is refused (ValueError: the collect is made again)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return None if value is None else _decode(next(a for a in args if a is not type(None)), value, root)
    if origin is list:
        return [_decode(args[0], v, root) for v in value]
    if origin is dict:
        return {k: _decode(args[1], v, root) for k, v in value}
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        hints = typing.get_type_hints(kind)
        return kind(**{f.name: _decode(hints[f.name], value[f.name], root) for f in dataclasses.fields(kind)})
    if kind is Path:
        relative = Path(value)
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(f"an output path outside the study folder: {value}")
        return root / relative
    return value


def to_manifest(r: CollectResult) -> dict[str, Any]:
    """Every field of what a collect made, as JSON: derived from `CollectResult`, so a new field is kept too."""
    return {f.name: _encode(getattr(r, f.name), r.study_dir) for f in dataclasses.fields(r)
            if f.name not in _NOT_SAVED}


def from_manifest(paths: StudyPaths, saved: dict[str, Any]) -> CollectResult:
    """What `to_manifest` saved, read back as an unchanged collect: every result file counts as cached."""
    hints = typing.get_type_hints(CollectResult)
    kept = {f.name: _decode(hints[f.name], saved[f.name], paths.root) for f in dataclasses.fields(CollectResult)
            if f.name not in _NOT_SAVED}
    kept["files_cached"] += kept["files_read"]
    kept["files_read"] = 0
    return CollectResult(paths.name, paths.root, True, **kept)
