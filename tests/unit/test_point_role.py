"""A point's role (measure, ceiling, calibration) and its resource shape."""

from __future__ import annotations

import json
from pathlib import Path

from studyctl.definition.checkpoint.points import POINT_OMIT_AT_DEFAULT, Point
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.planning.sweep import parse_sweep

SWEEP = {"study": "x", "models": ["llama_7b"], "matrix": {"zero_stage": [1, 3], "io_mode": ["buffered", "direct"]},
         "filesystems": {"a": {"path": "/tmp/a"}}, "ceilings": "off"}


def _points() -> list[Point]:
    return [p.point for p in expand(parse_sweep(json.loads(json.dumps(SWEEP)), Path("mem.yaml")))]


def test_a_measure_point_keeps_its_id_and_other_roles_get_their_own() -> None:
    for point in _points():
        assert "role" not in point.canonical()  # ids of points hashed before roles existed are kept
        ids = {role: point.model_copy(update={"role": role}).point_id for role in ("measure", "ceiling",
                                                                                   "calibration")}
        assert ids["measure"] == point.point_id and len(set(ids.values())) == 3
        ceiling = point.model_copy(update={"role": "ceiling"})
        assert ceiling.canonical()["role"] == "ceiling"
        assert Point.model_validate(ceiling.canonical()).point_id == ceiling.point_id
    assert set(POINT_OMIT_AT_DEFAULT) <= set(Point.model_fields)


def test_points_of_one_shape_differ_only_in_what_they_checkpoint() -> None:
    shapes = {p.point_id: shape_of(p) for p in _points()}
    assert len(set(shapes.values())) == 2  # ZeRO stage is not part of the shape; the I/O mode is
    assert len({s.key for s in shapes.values()}) == 2
