"""A cell is every setting but the repetition: each checkpoint option, varied alone, makes separate cells,
separate plot series and correct ratios (generated result files, no MPI)."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from studyctl.analysis.cells import IDENTITY, SETTINGS, independent, varying
from studyctl.analysis.labels import point_settings
from studyctl.analysis.plots.style import encode
from studyctl.analysis.ratios import parse_ratio, ratio_table
from studyctl.analysis.tables import build_tables
from studyctl.definition.checkpoint.points import CheckpointOptions, Point
from studyctl.errors import UserError
from tests.resultgen import axis_study, make_point, write_result

REPS = 3


def other_value(option: str) -> tuple[Any, Any, dict[str, Any]]:
    """The generated points' value of a checkpoint option and another valid one, from the model's types, with the
    settings both need (an engine's setting, such as device cuda, needs an engine other than stream)."""
    base = getattr(make_point().checkpoint, option)
    kind = CheckpointOptions.model_fields[option].annotation
    plain = [typing.get_args(arg)[0] if typing.get_origin(arg) is typing.Annotated else arg  # a bounded type: its own
             for arg in typing.get_args(kind)]
    args = tuple(v for arg in plain  # an optional Literal: its values
                 for v in (typing.get_args(arg) if typing.get_origin(arg) is typing.Literal else (arg,)))
    if isinstance(base, bool):
        candidates: list[Any] = [not base]
    elif base is None and int in args:  # an optional count, unset: try a few
        candidates = [2, 4, 8, 16]
    elif base is None and float in args:
        candidates = [0.5, 1.0]
    elif base is None and str in args:
        candidates = ["other"]
    elif args:
        candidates = [v for v in args if v != base]
    elif isinstance(base, int):
        candidates = [base + 1, base - 1]
    else:
        candidates = [base / 2]
    for value in candidates:
        for extra in ({}, {"engine": "torch_save"}):
            try:  # a layout that exists at every generated node count (collect refuses results of one that cannot)
                if not any(make_point(nodes=n, **{option: value, **extra}).problems() for n in (1, 2)):
                    return base, value, extra
            except ValidationError:
                continue
    raise AssertionError(f"no second valid value for {option}")


OPTIONS = list(CheckpointOptions.model_fields)


def test_settings_are_derived_from_the_point_model() -> None:
    assert set(OPTIONS) <= set(SETTINGS)
    assert {f for f in Point.model_fields if f not in ("checkpoint", "repetition")} <= set(SETTINGS)
    assert "repetition" not in IDENTITY and "io_mode_used" in IDENTITY
    flat = point_settings(make_point(rank_shift=2))
    assert flat["rank_shift"] == 2 and flat["model"] == "gpt2-125m" and set(flat) == set(SETTINGS)


@pytest.mark.parametrize("option", OPTIONS)
def test_each_checkpoint_option_makes_separate_cells_series_and_ratios(option: str, tmp_path: Path) -> None:
    base, other, extra = other_value(option)
    study = tmp_path / option
    axis_study(study, option, (base, other), reps=REPS, speed={base: 2.0, other: 3.0}, **extra)
    summary = build_tables(study).summary
    assert len(summary) == 2 * 2 * 2  # 2 values × 2 node counts × 2 phases: never pooled
    assert (summary["n"] == REPS).all()
    assert independent(summary, varying(summary, ("phase",))) == ["nodes", option]  # what ran follows it
    # a plot series per value, each on its own channel, with its own style
    write = summary[summary["phase"] == "write"]
    enc = encode(write, independent(write, varying(write, ("nodes", "phase"))))
    assert list(enc.channels) == [option]
    series = enc.series(write, "nodes")
    assert len(series) == 2 and len({str(enc.style(key)) for key, _ in series}) == 2
    # ratio of the other value to the base: 3 / 2, every other setting matched
    table = ratio_table(summary, parse_ratio(f"{option}={base}", summary))
    assert len(table) == 2 * 2  # 2 node counts × 2 phases
    assert table["ratio"].to_numpy() == pytest.approx([1.5] * 4, rel=1e-9)
    assert (table["ratio_ci95_low"] <= 1.5 + 1e-9).all() and (table["ratio_ci95_high"] >= 1.5 - 1e-9).all()


def test_fallback_to_buffered_is_its_own_cell_and_flagged(tmp_path: Path) -> None:
    study = tmp_path / "fallback"
    for rep in range(REPS):
        write_result(study, make_point(io_mode="direct", rep=rep, direct_fallback=True), [2.0], [2.0])
        write_result(study, make_point(io_mode="direct", rep=rep, direct_fallback=True, nodes=2), [3.0], [3.0],
                     io_mode_used="buffered")
    summary = build_tables(study).summary
    fell = summary[summary["io_mode_used"] == "buffered"]
    assert len(fell) == 2 and (fell["io_mode"] == "direct").all()
    assert all("fell back: direct ran as buffered" in f for f in fell["flags"])
    assert not any("fell back" in f for f in summary[summary["io_mode_used"] == "direct"]["flags"])


def test_ratio_errors_name_axes_and_values(tmp_path: Path) -> None:
    study = tmp_path / "io"
    axis_study(study, "io_mode", ("buffered", "direct"), reps=2)
    summary = build_tables(study).summary
    with pytest.raises(UserError, match="expected AXIS=BASELINE"):
        parse_ratio("io_mode", summary)
    with pytest.raises(UserError, match=r"not a setting; settings are .*io_mode"):
        parse_ratio("colour=red", summary)
    with pytest.raises(UserError, match="block_mib does not vary in this study; axes that vary: nodes, io_mode"):
        parse_ratio("block_mib=4", summary)
    with pytest.raises(UserError, match="'hybrid' is not a value of io_mode; values: buffered, direct") as err:
        parse_ratio("io_mode=hybrid", summary)
    assert err.value.exit_code == 2
    assert isinstance(ratio_table(summary, parse_ratio("io_mode=buffered", summary)), pd.DataFrame)


def test_points_the_sweep_excludes_are_not_cells(tmp_path: Path) -> None:
    from studyctl.analysis.collect import collect
    from studyctl.analysis.status import PointStatus

    study = tmp_path / "excl"
    kept, dropped = make_point(nodes=1), make_point(nodes=2)
    write_result(study, kept, [2.0], [2.0])
    write_result(study, dropped, [3.0], [3.0])  # measured before the sweep excluded it
    res = collect(study, [PointStatus(kept.point_id, "COMPLETED", 1),
                          PointStatus(dropped.point_id, "EXCLUDED", 1, excluded_reason="nodes > 1 ruled out")])
    assert res.points == 1 and res.left_out == [dropped.point_id]
    assert set(pd.read_csv(study / "tables" / "summary.csv")["nodes"]) == {1}
    assert "left out: 1 result(s)" in "\n".join(res.summary_lines())


@pytest.mark.parametrize("option", OPTIONS)
def test_points_that_differ_in_one_option_get_labels_that_name_it(option: str) -> None:
    """Two repetitions of each of two values of any checkpoint option: four labels, each naming the option's value
    (scale: `point_label`'s own), and nothing else that does not vary; the same from a points table's columns."""
    from studyctl.analysis.cells import telling_columns
    from studyctl.analysis.labels import LABELLED, axis_label, point_labels

    base, other, extra = other_value(option)
    points = [make_point(rep=rep, **{option: value, **extra}) for value in (base, other) for rep in (0, 1)]
    labels = point_labels(points)
    assert len(set(labels)) == 4
    lead = " " if option == "scale" else ", "  # the scale ends `point_label`'s own text; the rest follow it
    said = [lead + axis_label(option, value) for value in (base, other)]  # ", engine dcp", ", no fsync", " scale 0.01"
    assert [label.endswith(said[0]) for label in labels] == [True, True, False, False]
    assert all(label.endswith(said[1]) for label in labels[2:])
    assert labels[0].count(",") == (0 if option == "scale" else 1)  # the option alone: no setting it determines
    frame = pd.DataFrame([point_settings(p) for p in points])
    assert telling_columns(frame, LABELLED) == ([] if option == "scale" else [option])
