"""Every number a result carries, made impossible one at a time in a real result: collect leaves the result out with
a reason naming that field. The fields come from the result schema (`definition.result.plausibility.CHECKED`), never a
list here, so a field added to any section is attacked here too."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from studyctl.analysis.collect import collect
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.result.plausibility import CHECKED
from studyctl.definition.result.result_schema import Result
from tests.integration.test_recovery import make_task, relaunch
from tests.integration.test_strategies import run_point
from tests.resultgen import make_point, write_ceiling

HUGE_INT = 1 << 70
# Fields where the point's plan fixes a positive value (0 is then as impossible as 2^70).
PLANNED_POSITIVE = {
    "sizes.nominal_checkpoint_bytes", "sizes.written_checkpoint_bytes", "sizes.read_bytes_per_restore",
    "io.buffer_bytes", "io.block_bytes", "checkpoints.*.bytes", "summary.*.bytes_per_checkpoint",
    "dlio.checkpoint_size_GB", "ceilings.largest_shard_bytes", "ceilings.even_bytes", "recovery.bytes_read",
    "recovery.files_opened",
    # and where the schema itself says positive: a count no result has zero of
    "attempt", "summary.*.checkpoints", "ceilings.repeats", "strategy.tier_keep", "provenance.host_cores",
}


def _requests(ranks: list[dict[str, Any]]) -> None:
    """An object store's counts on each rank, as the client counts one PUT per small object."""
    for r in ranks:
        r["requests"] = {"put": r["files"], "part": 0, "get": 0, "head": 1, "list": 0, "delete": 0, "retries": 0,
                         "throttled": 0, "first_byte_s": r["duration_s"] / 2}


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A real recovery result (4 mpiexec ranks, tiered, a node lost, restarted by a new launch) with object store
    request counts added to its ranks, a ceiling point's result, and a real engine point's (torch.save, async: its
    engine section with blocking, staging, persist and storage times)."""
    tmp = tmp_path_factory.mktemp("real")
    task, _ = make_task(tmp, {"lost_nodes": 1}, tp=1, zero=3, strategy="tiered")
    proc = relaunch(task)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads((tmp / "out" / "result.json").read_text())
    for c in real["checkpoints"]:
        _requests(c["ranks"])
    study = tmp / "gen"
    ceiling = write_ceiling(study, make_point(nodes=2, rpn=1), 2.0, 3.0, bcast=4.0)
    made = json.loads((study / "points" / ceiling.point_id / "attempt-1" / "result.json").read_text())
    made["ceilings"]["rounds"] = {"storage_write_GiBps": [made["ceilings"]["storage_write_GiBps"]] * 2}
    run_point(tmp / "engine", nodes=1, rpn=2, engine="torch_save", strategy="async")
    engine = json.loads((tmp / "engine" / "out" / "result.json").read_text())
    for data in (real, made, engine):
        Result.model_validate(data)
    return [real, made, engine]


def _parent(data: dict[str, Any], pattern: str) -> tuple[Any, str | int, str] | None:
    """(the container, the key in it, the path as the result names it) of the pattern's first instance: a list's
    first entry, a mapping's write phase or else its first key."""
    node: Any = data
    concrete: list[str] = []
    keys = pattern.split(".")
    for i, k in enumerate(keys):
        key: str | int = k
        if isinstance(node, list):
            if not node:
                return None
            key = 0 if k == "*" else int(k)
        elif isinstance(node, dict) and k == "*":
            if not node:
                return None
            key = "write" if "write" in node else next(iter(node))
        concrete.append(str(key))
        if i == len(keys) - 1:
            return node, key, ".".join(concrete)
        node = node[key] if isinstance(node, list) else node.get(key)
        if node is None:
            return None
    return None


def _hostile(field: Any) -> list[Any]:
    """2^70, 1e300, NaN, and -1 where a figure cannot be negative (a signed time can: a speed-up); 0 where the
    plan or the schema makes a figure positive."""
    values: list[Any] = [HUGE_INT, 1e300, math.nan]
    if field.unit.name != "±s":
        values.append(-1)
    if field.pattern in PLANNED_POSITIVE or (field.unit.name == "ranks" and not field.pattern.endswith(".rank")):
        values.append(0)
    return values


def test_the_planned_positive_fields_exist() -> None:
    assert {f.pattern for f in CHECKED} >= PLANNED_POSITIVE


def test_every_numeric_field_of_every_section_is_checked(tmp_path: Path, bases: list[dict[str, Any]]) -> None:
    study = tmp_path / "results" / "hostile"
    cases: dict[str, str] = {}  # point id → the field path its reason must name
    rep = 100
    for field in CHECKED:
        base = next((b for b in bases if _parent(b, field.pattern) is not None), None)
        assert base is not None, f"no base result carries {field.pattern}: add one that does"
        for value in _hostile(field):
            data = copy.deepcopy(base)
            parent, key, concrete = _parent(data, field.pattern)  # type: ignore[misc]
            parent[key] = value
            rep += 1
            point = Point.model_validate(data["point"]).model_copy(update={"repetition": rep})
            data["point"], data["point_id"], data["study"] = point.canonical(), point.point_id, study.name
            path = study / "points" / point.point_id / "attempt-1" / "result.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(data))
            cases[point.point_id] = concrete
    controls = []
    for i, base in enumerate(bases):  # the untouched results stay usable
        point = Point.model_validate(base["point"]).model_copy(update={"repetition": i + 1})
        controls.append(point.point_id)
        data = {**base, "point": point.canonical(), "point_id": point.point_id, "study": study.name}
        path = study / "points" / point.point_id / "attempt-1" / "result.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data))
    res = collect(study)
    reasons = {p.point_id: p.reason for p in res.problems}
    assert not [reasons[c] for c in controls if c in reasons]
    missed = {cases[pid]: reasons.get(pid) for pid in cases if cases[pid] not in (reasons.get(pid) or "")}
    assert not missed, missed
    assert len(cases) >= 4 * len(CHECKED)
