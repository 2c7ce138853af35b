"""Figures rendered by forked children (`plots.render`): the same bytes as rendered here, recorded once written,
a failing child named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from studyctl.analysis.plots.render import Renderer, render, rendering
from studyctl.analysis.plots.style import plt, save


def figure(label: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 4, 8], [1.0, 1.9, 3.7, 6.8], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("nodes (log₂ scale)")
    ax.set_title(f"{label}: checkpoint write")
    return fig


def test_children_render_the_bytes_this_process_renders(tmp_path: Path) -> None:
    here = [save(figure(f"series {i}"), tmp_path / "here" / f"f{i}.png",
                 *figure_legend(f"series {i}")) for i in range(3)]
    with rendering(limit=2):
        forked = [save(figure(f"series {i}"), tmp_path / "forked" / f"f{i}.png",
                       *figure_legend(f"series {i}")) for i in range(3)]
    assert [p.read_bytes() for p in forked] == [p.read_bytes() for p in here]
    assert not [p for p in (tmp_path / "forked").iterdir() if p.name.startswith(".")]  # no temporary left


def figure_legend(label: str) -> tuple[list[object], list[str], str]:
    from matplotlib.lines import Line2D

    return [Line2D([], [], marker="o")], [label], "legend"


def test_done_runs_here_once_the_child_has_written(tmp_path: Path) -> None:
    seen: list[tuple[str, bool]] = []
    with rendering(limit=2):
        for name in ("a", "b", "c"):
            out = tmp_path / name
            render(out, lambda o=out: o.write_text(str(os.getpid())),
                   lambda o=out, n=name: seen.append((n, o.exists())))
    assert sorted(seen) == [("a", True), ("b", True), ("c", True)]
    assert all(int((tmp_path / n).read_text()) != os.getpid() for n in "abc")  # written elsewhere: a child


@pytest.mark.parametrize("limit", [None, 1])
def test_outside_the_block_or_on_one_core_it_renders_here(tmp_path: Path, limit: int | None) -> None:
    out = tmp_path / "here.png"
    done: list[bool] = []
    if limit is None:
        render(out, lambda: out.write_text(str(os.getpid())), lambda: done.append(True))
    else:
        with rendering(limit=limit):
            render(out, lambda: out.write_text(str(os.getpid())), lambda: done.append(True))
    assert int(out.read_text()) == os.getpid() and done == [True]


def test_at_most_limit_children_run_at_once(tmp_path: Path) -> None:
    r = Renderer(limit=2)
    for i in range(5):
        r.submit(tmp_path / f"{i}", lambda: None, lambda: None)
        assert len(r.running) <= 2
    r.finish()
    assert not r.running and not r.failed


def test_a_failing_child_is_named_and_its_file_not_recorded(tmp_path: Path) -> None:
    recorded: list[str] = []

    def fail() -> None:
        raise ValueError("no glyph")

    with pytest.raises(RuntimeError, match=r"rendering failed: bad\.png \(exit 1\)"), rendering(limit=2):
        render(tmp_path / "good.png", lambda: (tmp_path / "good.png").write_bytes(b"png"),
               lambda: recorded.append("good"))
        render(tmp_path / "bad.png", fail, lambda: recorded.append("bad"))
    assert recorded == ["good"]
