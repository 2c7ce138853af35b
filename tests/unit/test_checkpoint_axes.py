"""Checkpoint options that are sweep axes are declared once, on CheckpointOptions: the matrix, zips and exclude
rules accept exactly those options, each with the values the option itself accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from studyctl.definition.checkpoint.points import CHECKPOINT_AXES, CheckpointOptions
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import AXES, POINT_AXES, Matrix, parse_sweep
from studyctl.errors import UserError

PROBES: list[Any] = [-1, 0, 1, 2, 0.5, 1.5, 4096, True, False, None, "x", "direct", "full", "tiered", "node",
                     "deepspeed", "shm"]


def _option_refuses(name: str, value: Any) -> bool:
    """The option's own field refuses the value (model-level checks such as block ≤ buffer aside)."""
    try:
        CheckpointOptions.model_validate({name: value})
    except ValidationError as exc:
        return any(e["loc"][:1] == (name,) for e in exc.errors())
    return False


def _axis_refuses(name: str, value: Any) -> bool:
    try:
        Matrix.model_validate({name: [value]})
    except ValidationError:
        return True
    return False


@pytest.mark.parametrize("name", CHECKPOINT_AXES)
def test_an_axis_accepts_what_its_option_accepts(name: str) -> None:
    disagree = [v for v in PROBES if _option_refuses(name, v) != _axis_refuses(name, v)]
    assert not disagree, f"{name}: option and axis disagree on {disagree}"
    assert any(_option_refuses(name, v) for v in PROBES) or name in ("tier",), name  # the probes test something


def test_every_option_is_an_axis_unless_marked() -> None:
    assert set(CheckpointOptions.model_fields) - set(CHECKPOINT_AXES) == {"keep", "free_space_margin", "step_s",
                                                                         "compute", "allreduce_mib", "dispatch_share"}
    assert list(Matrix.model_fields) == [*POINT_AXES, *CHECKPOINT_AXES]  # error messages list them in this order
    assert set(AXES) == set(Matrix.model_fields)  # what exclude rules and zips accept


SWEEP = {"study": "axes", "models": ["gpt2-125m"], "filesystems": {"scratch": {"path": "/tmp"}},
         "checkpoint": {"scale": 0.01}, "ceilings": "off"}


@pytest.mark.parametrize(("where", "key"), [("matrix", "keep"), ("matrix", "step_s"), ("zip", "free_space_margin"),
                                            ("exclude", "keep")])
def test_an_option_that_is_not_an_axis_is_refused_in_one_line(where: str, key: str) -> None:
    section: Any = {"matrix": {key: [True]}, "zip": {"zip": [{key: [0.1, 0.2], "block_mib": [4, 8]}]},
                    "exclude": {"exclude": [{key: True}]}}[where]
    data = {**SWEEP, **(section if where != "matrix" else {"matrix": section})}
    with pytest.raises(UserError) as err:
        parse_sweep(data, Path("s.yaml"))
    line = str(err.value)
    assert "\n" not in line and key in line and ("allowed:" in line and "block_mib" in line), line


def test_checkpoint_axes_cross_zip_and_exclude() -> None:
    data = {**SWEEP, "matrix": {"block_mib": [4, 8], "fsync": [True, False]},
            "zip": [{"restore": ["rank", "full"], "rank_shift": [0, 1]}],
            "exclude": [{"block_mib": 8, "fsync": False}]}
    points = [pp for pp in expand(parse_sweep(data, Path("s.yaml"))) if pp.point.role == "measure"]
    seen = {(p.point.checkpoint.block_mib, p.point.checkpoint.fsync, p.point.checkpoint.restore,
             p.point.checkpoint.rank_shift, p.excluded) for p in points}
    assert len(points) == 8 and len(seen) == 8
    assert {(b, f) for b, f, _, _, excluded in seen if excluded} == {(8, False)}
    assert {(r, s) for _, _, r, s, _ in seen} == {("rank", 0), ("full", 1)}
