"""Text a received study brings (its description, point directory names, result fields, names) is data:
report.md and mlperf.md show it as the same characters (parsed by a real CommonMark + GFM-table parser,
markdown-it-py), and names that become file names are held to the sweep file's rule.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from studyctl.analysis.collect import collect
from studyctl.analysis.report.markdown import md, md_code
from studyctl.analysis.report.mlperf import mlperf_for_study
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.names import name_problem
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.resultgen import axis_study, make_point, result_dict, write_result

DESCRIPTION = ("# Owned\n<script>alert(1)</script> [click](javascript:alert(1)) | a | b |\n- item\n1. one\n***\n"
               "<img src=x onerror=alert(1)> &amp; `code` **bold** _em_ ![i](x) <https://evil> \\ ~~s~~ {x}")
POINT_DIR = "x<script>|y|[z](javascript:q)`w` #h"
FS_PATH = "/mnt/`a`|b <i>x</i> ``` [l](javascript:x)"
STUDY_DIR = "evil [t](javascript:t) <b>x<b> #1 |c| `q`"  # a directory name: no "/"
PARSER = MarkdownIt("commonmark").enable("table")


def _walk(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for t in tokens:
        out.append(t)
        out += _walk(t.children or [])
    return out


def _text(inline: Token) -> str:
    """What a reader sees of an inline token: its text and code, nothing that is markup."""
    parts = {"text": lambda c: c.content, "code_inline": lambda c: c.content, "softbreak": lambda c: "\n"}
    return "".join(parts[c.type](c) for c in inline.children or [] if c.type in parts)


def assert_only_data(markdown: str, shown: list[str]) -> list[Token]:
    """No raw HTML, no link, one title; each of `shown` appears, one-lined, in the text a reader sees (markup
    made of its characters, e.g. '**' turned bold, would drop them from that text)."""
    tokens = _walk(PARSER.parse(markdown))
    kinds = {t.type for t in tokens}
    assert not kinds & {"html_block", "html_inline", "link_open", "code_block", "fence", "hr"}, kinds
    assert [t.tag for t in tokens if t.type == "heading_open"].count("h1") == 1
    images = [t.attrs["src"] for t in tokens if t.type == "image"]
    assert all(str(src).startswith("plots/") for src in images), images
    inlines = [t for t in tokens if t.type == "inline"]
    for text in shown:
        one_line = " ".join(text.split())
        assert any(one_line in _text(t) for t in inlines), one_line
    return tokens


def hostile_study(results: Path) -> Path:
    plain = results / "evil"
    axis_study(plain, "zero", (1, 3), reps=2)  # results name their study "evil"; its directory is then renamed
    root = plain.rename(results / STUDY_DIR)
    (root / "sweep.yaml").write_text(json.dumps({"study": "evil", "description": DESCRIPTION}))
    bad = root / "points" / POINT_DIR / "attempt-1"
    bad.mkdir(parents=True)
    (bad / "result.json").write_text("{ truncated")
    point = make_point(nodes=4)
    data = result_dict(point, [4.0, 4.0], [8.0, 8.0], study="evil")
    data["filesystem"].update(path=FS_PATH, mount_options=FS_PATH, fstype="ext4 | x", source="**dev**")
    good = root / "points" / point.point_id / "attempt-1"
    good.mkdir(parents=True)
    (good / "result.json").write_text(json.dumps(data))
    return root


def test_report_md_shows_hostile_text_as_text(tmp_path: Path) -> None:
    root = hostile_study(tmp_path)
    res = collect(root)
    assert any(p.point_id == POINT_DIR for p in res.problems)
    tokens = assert_only_data(res.report_md.read_text(), [DESCRIPTION, POINT_DIR, FS_PATH, STUDY_DIR])
    rows = [t for t in tokens if t.type == "tr_open"]
    assert rows  # the point's problem row keeps its cells: its name did not split it
    assert "<script>" not in res.report_html.read_text()  # the HTML stays escaped


def test_mlperf_md_shows_hostile_text_as_text(tmp_path: Path) -> None:
    root = hostile_study(tmp_path)
    _, _, mlperf_md = mlperf_for_study(root, root.name)
    assert_only_data(mlperf_md.read_text(), [STUDY_DIR])


@pytest.mark.parametrize("text", ["- a", "+ a", "= a", "1. a", "2) a", "> a", "    a", "#a", "a\n===", "a\n---",
                                  "<div>", "a|b", "`", "``a``", "a\\", "[a]: /x", "&copy;", "*", "_a_", ":---",
                                  "[a](javascript:b)", "![i](x)", "<https://e>", "1) a|b", "a #", "~~a~~"])
def test_md_is_text_anywhere(text: str) -> None:
    for where in ("{}", "- {}", "| {} | x |\n|---|---|\n| {} | y |", "**k**: {}"):
        tokens = _walk(PARSER.parse(where.replace("{}", md(text))))
        assert not {t.type for t in tokens} & {"html_block", "html_inline", "link_open", "heading_open",
                                                "ordered_list_open", "blockquote_open", "code_block", "em_open"}
        assert any(" ".join(text.split()) in _text(t) for t in tokens if t.type == "inline"), (where, text)
    for where in ("| {} | x |\n|---|---|\n", "- {}"):
        code = _walk(PARSER.parse(where.replace("{}", md_code(text))))
        cells = [_text(t) for t in code if t.type == "inline"]
        assert " ".join(text.split()) in cells, (where, text, cells)


def test_names_follow_the_sweep_rule() -> None:
    assert name_problem({"model": "a" * 64}) is None
    assert name_problem({"model": "gpt2-125m", "filesystem": "scratch_1.x"}) is None
    for bad in ("a" * 65, "a" * 300, "../x", "a/b", "x\n", "", ".hidden", "-x", "ü", "a b", "[/x]", None, 3):
        problem = name_problem({"study": "ok", "model": bad})
        assert problem and problem.startswith("model name ") and len(problem) < 160, (bad, problem)


def test_a_sweep_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text('study: "abc\\n"\nmodels: [gpt2-125m]\nfilesystems: {scratch: {path: /tmp}}\n')
    with pytest.raises(UserError, match="1-64 letters"):
        load_sweep(sweep)


def _named(model: str = "gpt2-125m", fs: str = "scratch") -> Point:
    spec = dataclasses.replace(lookup("gpt2-125m"), name=model)
    return Point(model=spec, zero_stage=1, nodes=8, ranks_per_node=2, filesystem=fs,
                 checkpoint=make_point().checkpoint)


@pytest.mark.parametrize("what", ["model 300", "model slash", "model newline", "filesystem", "study"])
def test_a_result_with_a_bad_name_is_one_unusable_file_not_a_failed_collect(tmp_path: Path, what: str) -> None:
    results = tmp_path / "results"
    root = results / "got"
    axis_study(root, "zero", (1, 3), reps=2)
    Ledger(root / "ledger.sqlite").close()
    kw: dict[str, Any] = {}
    point = {"model 300": _named("m" * 300), "model slash": _named("../../../../tmp/x"),
             "model newline": _named("gpt2\n"), "filesystem": _named(fs="a b"), "study": _named()}[what]
    if what == "study":
        kw["study"] = "s" * 300
    data = result_dict(point, [1.0, 1.0], [2.0, 2.0], **kw)
    path = root / "points" / point.point_id / "attempt-1" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    res = run_cli("collect", "got", "--results", str(results))
    assert res.returncode == 0, res.stderr
    assert f"unusable result: point {point.point_id} attempt 1: {what.split()[0]} name" in res.stdout
    assert "8 cell×phase rows" in res.stdout  # the other points collected
    assert (root / "report.html").is_file() and not list((tmp_path).glob("x*"))
    written = write_result(root, make_point(rep=5), [1.0, 1.0], [2.0, 2.0])  # the study goes on
    assert written.is_file() and run_cli("mlperf", "got", "--results", str(results)).returncode == 0


def test_ordinary_text_stays_readable_in_the_markdown_source() -> None:
    for text in ("insufficient_space: needs 12.0 GiB, 3.1 GiB free", "ZeRO-3 with PP > 1 is not real",
                 "MPICH Version: 4.2.0", "2026-11-22T10:00:00+00:00", "studyctl (worker)", "rw,relatime"):
        assert md(text) == text
