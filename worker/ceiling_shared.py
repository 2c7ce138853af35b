"""`ceilings: shared`: a ceiling is a property of its shape, so a study reuses one another study of the
same results root measured on the same shape, filesystem path and nodes, instead of measuring its own.

A study that measures a shared ceiling leaves a record beside its points (definition.planning.ceilings.shared_record):
the result's path within that study. Looking one up reads at most one small record per study, never the
studies' points. Everything read is another study's data: bounded, validated (the result schema and the same
plausibility rules collect holds a result to), and only a result inside that study, of the same shape, path and
nodes, is taken; a damaged or tampered one is not, with a line in the point's log naming it, and the point
measures its own. The newest such result wins; the reused CeilingInfo names it
(`reused_from`), and its checkpoints are the probe's own timings.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.planning.ceilings import shared_record
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.result.plausibility import implausible
from studyctl.definition.result.result_schema import CeilingInfo, CheckpointTiming, Result
from studyctl.fsutil import atomic_write_text

MAX_STUDIES = 10_000  # study directories looked at, at most
MAX_RECORD_BYTES = 4096
MAX_RESULT_BYTES = 64 << 20


@dataclass(frozen=True)
class Reused:
    checkpoints: list[CheckpointTiming]
    ceilings: CeilingInfo  # with reused_from set
    finished_at: str


def record(task: WorkerTask, nodes: list[str]) -> None:
    """Rank 0, after its result is written: this study has this shape's ceiling on this path and these nodes."""
    study = _study_dir(task)
    path = shared_record(study, shape_of(task.point).key, task.filesystem_path, nodes)
    path.parent.mkdir(exist_ok=True)
    atomic_write_text(path, json.dumps({"result": str(Path(task.result_path).relative_to(study))}))


def _study_dir(task: WorkerTask) -> Path:
    assert task.shared_ceilings_root is not None  # only a shared ceiling point shares
    return Path(task.shared_ceilings_root) / task.study


def find(task: WorkerTask, nodes: list[str]) -> Reused | None:
    """Rank 0: the newest reusable ceiling of another study, or None (never raises on what it reads)."""
    own = _study_dir(task)
    key = shape_of(task.point).key
    found = []
    try:
        studies = sorted(p for p in own.parent.iterdir() if p.is_dir() and p.name != own.name)[:MAX_STUDIES]
    except OSError:
        return None
    for study in studies:
        reused = _read(study, shared_record(study, key, task.filesystem_path, nodes), task, key, nodes)
        if reused is not None:
            found.append(reused)
    return max(found, key=lambda r: r.finished_at, default=None)


def _read(study: Path, path: Path, task: WorkerTask, key: str, nodes: list[str]) -> Reused | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
            return None
        rel = json.loads(path.read_text())["result"]
        result = Path(os.path.realpath(study / str(rel)))
        inside = str(result).startswith(os.path.realpath(study) + os.sep)
        if not inside or not result.is_file() or result.stat().st_size > MAX_RESULT_BYTES:
            return None
        where = f"{study.name}/{result.parent.relative_to(study)}"
        r = Result.model_validate_json(result.read_text())
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        return _refused(where, f"does not match the result schema: {'.'.join(map(str, err['loc']))}: {err['msg']}")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    same = (r.ceilings is not None and r.ceilings.shape == key and r.point.role == "ceiling"
            and os.path.realpath(r.filesystem.path) == os.path.realpath(task.filesystem_path)
            and r.provenance.node_names == sorted(set(nodes)))
    if not same or r.ceilings is None:
        return None
    problem = (f"holds point {r.point_id}, but its point hashes to {r.point.point_id}"
               if r.point.point_id != r.point_id else implausible(r))
    if problem:
        return _refused(where, f"implausible figures: {problem}")
    origin = r.ceilings.reused_from or where
    return Reused(r.checkpoints, r.ceilings.model_copy(update={"reused_from": origin}), r.provenance.finished_at)


def _refused(where: str, reason: str) -> Reused | None:
    """A shared ceiling another study recorded is not taken, and the point's log says why (one line)."""
    print(f"studyctl worker: ceilings shared: not reusing {where}: {reason}", file=sys.stderr, flush=True)
    return None
