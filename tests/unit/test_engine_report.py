"""Engines side by side (`analysis.engines`, the report's section) on tables built from generated result files: the
engine's time over stream's with its CI, the framework's share and limit, the table in Markdown and HTML.

The bandwidths are the test's own (tests/resultgen.py), shaped like the H200 figures: stream at 1.42 GiB/s, torch.save
with CRC-32 at 0.79, without at 1.41; its restores at 0.7× stream's.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from studyctl.analysis.cells import HEADLINE
from studyctl.analysis.engines import ENGINE_AXES, FROM_SPLIT, FROM_STREAM, side_by_side, stream_twins
from studyctl.analysis.report.context import build_context
from studyctl.analysis.report.engines import engine_section
from studyctl.analysis.report.render import render
from studyctl.analysis.tables import Tables, build_tables
from studyctl.definition.checkpoint.engine_options import ENGINE_SETTINGS, EngineOptions
from studyctl.definition.inputs.tdist import t_quantile_975
from tests.resultgen import make_point, write_ceiling, write_engine_result, write_result

WRITE = {("stream", True): 1.42, ("torch_save", True): 0.79, ("torch_save", False): 1.41}
JITTER = (0.98, 1.0, 1.02)


def engine_study(root: Path, cells: dict[tuple[str, bool], float] | None = None, ceiling: bool = True) -> Path:
    """Three repetitions per (engine, crc32); one shape, its ceiling at 1.2 GiB/s write, 1.5 read."""
    path = root / "eng"
    for (engine, crc), bw in (cells or WRITE).items():
        for rep, j in enumerate(JITTER):
            point = make_point(zero=0, rpn=1, rep=rep, engine=engine, crc32=crc)
            read = 1.33 * j * (1.0 if engine == "stream" else 0.7)
            write_result(path, point, [bw * j] * 2, [read] * 2)
    if ceiling:
        write_ceiling(path, make_point(zero=0, rpn=1), 1.2, 1.5)
    (path / "sweep.yaml").write_text("filesystems:\n  scratch: {path: /tmp}\n")
    return path


def row(tables: Tables, engine: str, crc32: bool, phase: str) -> dict:
    s = tables.summary
    found = s[(s["engine"] == engine) & (s["crc32"] == crc32) & (s["phase"] == phase)]
    assert len(found) == 1
    return found.iloc[0].to_dict()


def test_engine_axes_are_the_option_models_engine_settings() -> None:
    settings = {n for always, background in ENGINE_SETTINGS.values() for n in (*always, *background)}
    assert set(ENGINE_AXES) == {"engine", *settings} and set(ENGINE_AXES) <= set(EngineOptions.model_fields)
    assert not {"state", "replicated_writer"} & set(ENGINE_AXES)  # they change the bytes: part of the shape


def test_time_over_stream_is_the_ratio_of_means_with_its_ci(tmp_path: Path) -> None:
    t = build_tables(engine_study(tmp_path))
    stream, slow = row(t, "stream", True, "write"), row(t, "torch_save", True, "write")
    r = stream[HEADLINE] / slow[HEADLINE]
    assert r == pytest.approx(1.42 / 0.79)
    # the log-scale interval of two means, by hand: r · exp(± t · sqrt((se_a/a)² + (se_b/b)²)), df = n − 1
    rel = math.hypot(stream[f"{HEADLINE}_se"] / stream[HEADLINE], slow[f"{HEADLINE}_se"] / slow[HEADLINE])
    factor = math.exp(t_quantile_975(2) * rel)
    assert slow["time_over_stream"] == pytest.approx(r)
    assert slow["time_over_stream_low"] == pytest.approx(r / factor)
    assert slow["time_over_stream_high"] == pytest.approx(r * factor)
    assert slow["stream_GiBps"] == pytest.approx(stream[HEADLINE])
    assert slow["framework_share"] == pytest.approx(1 - 1 / r)
    assert slow["framework_share_low"] == pytest.approx(1 - factor / r)
    assert slow["framework_basis"] == FROM_STREAM
    # the settings stream does not have (crc32 False) are no obstacle to the match
    assert row(t, "torch_save", False, "write")["time_over_stream"] == pytest.approx(1.42 / 1.41)
    twins = stream_twins(t.summary)
    assert len(twins) == 4 and set(twins["phase"]) == {"write", "read"}  # two engine cells × two phases
    assert math.isnan(stream["time_over_stream"]) and math.isnan(stream["framework_share"])


def test_the_framework_is_named_and_a_cell_at_streams_pace_is_not(tmp_path: Path) -> None:
    t = build_tables(engine_study(tmp_path))
    slow = row(t, "torch_save", True, "write")
    assert slow["limit"] == "framework"
    assert re.fullmatch(r"torch\.save's serialization takes 44% \[\d+%, \d+%\] of the time; stream on the same "
                        r"bytes reaches 1\.42 GiB/s", slow["limit_evidence"]), slow["limit_evidence"]
    assert row(t, "torch_save", True, "read")["limit_evidence"].startswith("torch.load's deserialization takes 30%")
    fast = row(t, "torch_save", False, "write")  # above the one-file probe, as stream is: storage
    assert fast["limit"] == "storage" and row(t, "stream", True, "write")["limit"] == "storage"


def test_without_a_stream_cell_the_share_is_not_known_and_said_so(tmp_path: Path) -> None:
    t = build_tables(engine_study(tmp_path, {("torch_save", True): 0.79, ("torch_save", False): 1.41}))
    slow = row(t, "torch_save", True, "write")
    assert math.isnan(slow["framework_share"]) and "no stream cell on this shape" in slow["framework_note"]
    assert slow["limit"] == "none" and slow["limit_evidence"].endswith("the framework's share is not known")
    table = side_by_side(t.summary)  # crc32 varies: still side by side, without a ratio
    assert list(table["engine_label"]) == ["torch_save, crc32 False", "torch_save, crc32 True"] * 2


def test_without_a_stream_cell_the_share_comes_from_the_storage_calls(tmp_path: Path) -> None:
    """torch_save records its time inside storage calls: 40% of its save there leaves 60% to the framework. DCP
    writes its paths itself: no split, no stream cell, the share is not known."""
    study = tmp_path / "split"
    for rep, j in enumerate(JITTER):
        write_engine_result(study, make_point(zero=0, rpn=1, rep=rep, engine="torch_save"), [0.79 * j] * 2,
                            [0.9 * j] * 2, storage_share=0.4)
        write_engine_result(study, make_point(zero=0, rpn=1, rep=rep, engine="dcp"), [0.99 * j] * 2, [0.95 * j] * 2,
                            storage_share=None)
    t = build_tables(study)
    save = row(t, "torch_save", True, "write")
    assert save["framework_share"] == pytest.approx(0.6) and save["framework_basis"] == FROM_SPLIT
    assert math.isnan(save["time_over_stream"])
    assert save["limit"] == "framework" and save["limit_evidence"] == (
        "torch.save's serialization takes 60% of the time; the rest is inside its storage calls (no stream cell on "
        "this shape)")
    dcp = row(t, "dcp", True, "write")
    assert math.isnan(dcp["framework_share"]) and dcp["limit"] == "unknown"
    assert dcp["limit_evidence"].endswith("engine dcp: no stream cell on this shape and no time inside storage calls "
                                          "recorded: the framework's share is not known")
    section = engine_section(t.summary)
    shares = {r["engine_label"]: r["share_text"] for r in section["rows"] if r["phase"] == "write"}
    assert shares == {"dcp": dcp["framework_note"], "torch_save": f"60% ({FROM_SPLIT})"}


def test_no_engine_axis_no_section(tmp_path: Path) -> None:
    t = build_tables(engine_study(tmp_path, {("torch_save", True): 0.79}))
    assert side_by_side(t.summary).empty
    context = build_context(tmp_path / "eng", "eng", None, t, [], [], None, [], {})
    assert context["engines"] == {"rows": [], "notes": []}


def rendered(tmp_path: Path) -> tuple[str, str]:
    study = engine_study(tmp_path)
    context = build_context(study, "eng", None, build_tables(study), [], [], None, [], {})
    render(context, study / "report.html", study / "report.md")
    return (study / "report.md").read_text(), (study / "report.html").read_text()


def test_the_side_by_side_table_in_markdown(tmp_path: Path) -> None:
    md, _ = rendered(tmp_path)
    section = md[md.index("## Engines side by side"):md.index("## How close to the hardware")]
    lines = [line for line in section.splitlines() if line.startswith("| all points")]
    assert [line.split(" | ")[1:3] for line in lines] == [
        ["stream", "write"], ["torch_save, crc32 False", "write"], ["torch_save, crc32 True", "write"],
        ["stream", "read"], ["torch_save, crc32 False", "read"], ["torch_save, crc32 True", "read"]]
    slow = lines[2].split(" | ")
    assert slow[5] == "0.790" and slow[7].startswith("**1.80× \\[") and slow[8].startswith("44% \\[")
    assert slow[9] == "**framework**" and "stream on the same bytes reaches 1.42 GiB/s" in slow[10]
    assert lines[0].split(" | ")[7] == "**1 (baseline)**"
    assert "framework: an engine (torch.save, DCP)" in md  # the rule, in its place among the others


def test_the_side_by_side_table_in_html(tmp_path: Path) -> None:
    _, html = rendered(tmp_path)
    assert '<a href="#engines">Engines</a>' in html and '<h2 id="engines">' in html
    rows = re.findall(r"<tr><td class=\"l\">all points</td><td class=\"l\">([^<]+)</td><td class=\"l\">(\w+)</td>"
                      r"(.*?)</tr>", html)
    assert [(e, p) for e, p, _ in rows][:3] == [("stream", "write"), ("torch_save, crc32 False", "write"),
                                                ("torch_save, crc32 True", "write")]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows[2][2])
    assert cells[2] == "0.790" and cells[4].startswith("<b>1.80× [") and cells[5].startswith("44% [")
    assert cells[6] == "<b>framework</b>"
