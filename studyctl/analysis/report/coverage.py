"""The report's coverage section: which points completed, failed (with the command to rerun), were excluded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from studyctl.analysis.cells import telling_columns
from studyctl.analysis.labels import LABELLED, label_with, point_label
from studyctl.analysis.results import Failure, Problem
from studyctl.analysis.section import Column, Section
from studyctl.analysis.status import PointStatus
from studyctl.analysis.tables import Tables
from studyctl.states import EXCLUDED, NOT_FAILED, State


@dataclass(frozen=True)
class CoverageRow:
    point_id: str
    state: str
    attempts: int
    label: str
    reason: str
    command: str


def resubmit_command(study: str, point_id: str) -> str:
    return f"studyctl sweep resubmit {study} --point {point_id}"


def _labels(tables: Tables) -> dict[str, str]:
    pts = tables.points
    if pts.empty or "point_id" not in pts:
        return {}
    first = pts.drop_duplicates("point_id")
    first = first[first["tool"] == "studyctl"]
    telling = telling_columns(first, LABELLED)  # engine, strategy, ... where they vary beyond the label's
    keys = [k for k in (*LABELLED, *telling) if k in first]
    # by column, the label's columns alone (a row at a time over every column was half a second at 10,000 points)
    labels = {}
    for pid, *rest in zip(first["point_id"].tolist(), *(first[k].tolist() for k in keys), strict=True):
        row = dict(zip(keys, rest, strict=True))
        labels[pid] = label_with(point_label(row), row, telling)
    return labels


def _failed_from_files(study: str, pid: str, error: Failure | None, problem: Problem | None) -> CoverageRow:
    if error is not None:
        return CoverageRow(pid, State.FAILED.value, error.attempt, "", f"{error.failure_class}: {error.reason}",
                           resubmit_command(study, pid))
    assert problem is not None
    return CoverageRow(pid, State.FAILED.value, problem.attempt or 0, "", f"invalid result: {problem.reason}",
                       resubmit_command(study, pid))


def _from_files(study: str, tables: Tables, labels: dict[str, str]) -> dict[str, list[CoverageRow]]:
    cov: dict[str, list[CoverageRow]] = {"completed": [], "failed": [], "excluded": [], "other": []}
    for pid in sorted(tables.infos):
        cov["completed"].append(CoverageRow(pid, State.COMPLETED.value, tables.infos[pid]["attempt"],
                                            labels.get(pid, ""), "", ""))
    errors = {f.point_id: f for f in tables.failures}
    invalid = {p.point_id: p for p in tables.problems}
    for pid in sorted((set(errors) | set(invalid)) - set(tables.infos)):
        cov["failed"].append(_failed_from_files(study, pid, errors.get(pid), invalid.get(pid)))
    return cov


def coverage(study: str, tables: Tables, statuses: Sequence[PointStatus] | None) -> dict[str, list[CoverageRow]]:
    """completed / failed / excluded / other rows; from the statuses handed in, else from the files alone."""
    labels = _labels(tables)
    if statuses is None:
        return _from_files(study, tables, labels)
    cov: dict[str, list[CoverageRow]] = {"completed": [], "failed": [], "excluded": [], "other": []}
    errors = {f.point_id: f for f in tables.failures}
    for s in statuses:
        label = s.label or labels.get(s.point_id, "")
        if s.excluded:
            cov["excluded"].append(CoverageRow(s.point_id, EXCLUDED, s.attempts, label,
                                               s.excluded_reason or "excluded", ""))
        elif s.state == State.COMPLETED.value:
            cov["completed"].append(CoverageRow(s.point_id, s.state, s.attempts, label, "", ""))
        elif s.state not in NOT_FAILED:
            f = errors.get(s.point_id)
            reason = s.failure_reason or (f"{f.failure_class}: {f.reason}" if f else "no reason recorded")
            cov["failed"].append(CoverageRow(s.point_id, s.state, s.attempts, label, reason,
                                             s.resubmit_command or resubmit_command(study, s.point_id)))
        else:
            cov["other"].append(CoverageRow(s.point_id, s.state, s.attempts, label, "", ""))
    return cov

# The coverage tables both flavours show (the queued points and the excluded ones are a list in Markdown).
FAILED_POINTS = Section("failed", (
    Column("point", "point_id", "code", align="left"),
    Column("state", "state", "text", align="left", css="bad"),
    Column("attempts", "attempts"),
    Column("config", "label", "text", align="left"),
    Column("reason", "reason", "text", align="left"),
    Column("rerun", "command", "code", align="left", copy=True),
))

UNUSABLE = Section("problems", (
    Column("point", "point_id", "code", align="left"),
    Column("attempt", lambda p: "–" if p.attempt is None else p.attempt),
    Column("reason", "reason", "text", align="left"),
    Column("file", "path", "text", align="left", css="muted"),
))

EXCLUDED_REASONS = Section("excluded", (
    Column("reason", lambda r: r[0], "text", align="left"),
    Column("points", lambda r: r[1]),
))
