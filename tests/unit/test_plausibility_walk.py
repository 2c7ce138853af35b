"""The plausibility walk is derived from the result schema: every number in it, and a field added to any section
later, is checked without being listed; a number without a unit cannot be added at all. The bounded validator a
collect reads files with holds every one of those numbers to the same bound."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic import ValidationError

from studyctl.definition.result.plausibility import (
    BOUNDS,
    CHECKED,
    MAX_SECONDS,
    NOT_FIGURES,
    bounded_schema,
    bounded_validator,
    implausible,
    numeric_fields,
)
from studyctl.definition.result.result_fields import Bytes, RecoveryTiming
from studyctl.definition.result.result_schema import Result
from tests.resultgen import make_point, result_dict


def _json_numbers(schema: dict[str, Any], node: dict[str, Any], path: str) -> set[str]:
    """Paths of every integer or number in pydantic's JSON schema of the result (an independent reading)."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].split("/")[-1]]
    found: set[str] = set()
    for option in node.get("anyOf", []):
        found |= _json_numbers(schema, option, path)
    kind = node.get("type")
    if kind in ("integer", "number") and "const" not in node and "enum" not in node:
        found.add(path)
    if kind == "array":
        found |= _json_numbers(schema, node["items"], f"{path}.*")
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        found |= _json_numbers(schema, node["additionalProperties"], f"{path}.*")
    for name, sub in node.get("properties", {}).items():
        found |= _json_numbers(schema, sub, f"{path}.{name}" if path else name)
    return found


def test_the_checked_fields_are_every_number_in_the_result_schema() -> None:
    schema = Result.model_json_schema()
    numbers = {p for p in _json_numbers(schema, schema, "") if p.split(".")[0] not in NOT_FIGURES}
    assert {f.pattern for f in CHECKED} == numbers
    assert {f.unit.name for f in CHECKED} <= set(BOUNDS)
    sections = {f.pattern.split(".")[0] for f in CHECKED}
    assert {"recovery", "ceilings", "strategy", "checkpoints", "summary"} <= sections


class MoreRecovery(RecoveryTiming):
    spare_bytes: Bytes = 0  # a field a later version adds


class MoreResult(Result):
    recovery: MoreRecovery | None = None


def test_a_field_added_to_a_section_is_checked_without_being_listed() -> None:
    assert "recovery.spare_bytes" in {f.pattern for f in numeric_fields(MoreResult)}
    point = make_point()
    base = Result.model_validate(result_dict(point, [2.0], [3.0]))
    recovery = MoreRecovery(scenario="same", launcher="mpiexec", shared_clock=True, step_dir="global_step0",
                            old_world_size=2, old_tensor_parallel=1, old_pipeline_parallel=1, old_data_parallel=2,
                            new_world_size=2, new_tensor_parallel=1, new_pipeline_parallel=1, new_data_parallel=2,
                            launch_s=1.0, restore_s=1.0, read_s=1.0, ready_s=1.0, step_s=0.1,
                            time_to_first_step_s=3.0, bytes_read=0, bytes_restored_per_rank=[0, 0], files_opened=0,
                            files_opened_per_rank=[0, 0], spare_bytes=1 << 70)
    hostile = MoreResult.model_construct(**{**dict(base), "recovery": recovery})
    assert "recovery.spare_bytes" in (implausible(hostile) or "")


def test_a_number_without_a_unit_cannot_join_the_schema() -> None:
    class Unitless(RecoveryTiming):
        spare: int = 0

    class WithUnitless(Result):
        recovery: Unitless | None = None

    with pytest.raises(TypeError, match=r"recovery\.spare"):
        numeric_fields(WithUnitless)


def _bounded_numbers(node: Any, path: str, out: dict[str, dict[str, Any]]) -> None:
    """Path → constraints of every int and float in a core schema (model fields by name, list and dict items "*")."""
    if isinstance(node, list | tuple):
        for item in node:
            _bounded_numbers(item, path, out)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("int", "float"):
        out[path] = node
    elif kind == "model-fields":
        for name, field in node["fields"].items():
            if not (path == "" and name in NOT_FIGURES):
                _bounded_numbers(field["schema"], f"{path}.{name}" if path else name, out)
    elif kind in ("list", "dict"):
        _bounded_numbers(node["items_schema" if kind == "list" else "values_schema"], f"{path}.*", out)
    else:
        for key, value in node.items():
            if key not in ("serialization", "metadata", "cls", "config"):
                _bounded_numbers(value, path, out)


def test_the_bounded_validator_holds_every_checked_number_to_its_unit() -> None:
    schema, _ = bounded_schema()
    found: dict[str, dict[str, Any]] = {}
    _bounded_numbers(schema, "", found)
    assert set(found) == {f.pattern for f in CHECKED}
    for field in CHECKED:
        node, (low, high, _) = found[field.pattern], BOUNDS[field.unit.name]
        assert node["le"] <= high < node["le"] + 1, field.pattern
        assert max(node.get("ge", -math.inf), node.get("gt", -math.inf)) >= low, field.pattern
        assert node["type"] == "int" or node["allow_inf_nan"] is False, field.pattern


def test_a_result_within_bounds_is_the_same_result_and_one_beyond_is_refused_by_the_validator_alone() -> None:
    data = result_dict(make_point(), [2.0], [3.0])
    text = json.dumps(data)
    assert bounded_validator().validate_json(text) == Result.model_validate_json(text)
    data["checkpoints"][0]["ranks"][1]["duration_s"] = MAX_SECONDS * 1.001
    text = json.dumps(data)
    with pytest.raises(ValidationError, match=r"checkpoints\.0\.ranks\.1\.duration_s"):
        bounded_validator().validate_json(text)
    lenient = Result.model_validate_json(text)  # the schema's own validator is left as it was: the walk names it
    assert "checkpoints.0.ranks.1.duration_s" in (implausible(lenient) or "")
    assert all(cls.__pydantic_complete__ for cls in bounded_schema()[1])
