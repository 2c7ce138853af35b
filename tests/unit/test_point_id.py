"""A point's id has one rule (`definition.inputs.point_id`): the hash of its canonical form, a field marked `later` left
out
at its default, for the point's own fields and its options alike. Ids are pinned: studies on disk name their
points by them, so a change of the rule that moves an id fails here."""

from __future__ import annotations

import json

import pytest

from studyctl.definition.checkpoint.points import (
    LATER_CHECKPOINT_DEFAULTS,
    POINT_OMIT_AT_DEFAULT,
    CheckpointOptions,
    Point,
)
from studyctl.definition.checkpoint.recovery import Recovery
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.point_id import canonical_id, is_later, later_defaults

BASE = Point(model=lookup("gpt2-125m"), zero_stage=1, filesystem="x")
# (update, id): computed before the rule was declared once; every marker moved must keep them
PINNED = [
    ({}, "13d91da4bcc9"),
    ({"role": "ceiling"}, "40b23dd33f2e"),
    ({"checkpoint": CheckpointOptions(naming="deepspeed")}, "84ff1d14e56b"),
    ({"checkpoint": CheckpointOptions(fsync=False)}, "781bd770b698"),
    ({"checkpoint": CheckpointOptions(subset_world_size=8)}, "dfb77f4dca25"),
    ({"checkpoint": CheckpointOptions(engine="dcp")}, "476951561f71"),
]


@pytest.mark.parametrize(("update", "expected"), PINNED, ids=lambda x: json.dumps(x, default=str)[:40])
def test_ids_stay_as_they_were(update: dict, expected: str) -> None:
    assert BASE.model_copy(update=update).point_id == expected


def test_the_id_is_the_hash_of_the_canonical_form() -> None:
    point = BASE.model_copy(update={"recovery": Recovery(scenario="same")})
    assert point.point_id == canonical_id(json.dumps(point.canonical(), sort_keys=True, separators=(",", ":")))


def test_what_leaves_the_canonical_form_is_what_is_marked_later() -> None:
    assert POINT_OMIT_AT_DEFAULT == later_defaults(Point) == {"role": "measure", "recovery": None}
    assert later_defaults(CheckpointOptions) == LATER_CHECKPOINT_DEFAULTS
    assert {"naming", "fsync", "subset_world_size", "strategy", "engine"} <= set(LATER_CHECKPOINT_DEFAULTS)
    canonical = BASE.canonical()
    assert not set(POINT_OMIT_AT_DEFAULT) & set(canonical)
    assert not set(LATER_CHECKPOINT_DEFAULTS) & set(canonical["checkpoint"])
    # a field not marked stays in the canonical form at its default: the rule reads the marker, nothing else
    unmarked = [n for n, f in CheckpointOptions.model_fields.items() if not is_later(f)]
    assert unmarked and set(unmarked) <= set(canonical["checkpoint"])
