"""Outputs made by forked children (`forked`): figures the same bytes as rendered here, recorded once written, a
failing child named."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest

from studyctl.analysis.forked import forking, in_child
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
    with forking(limit=2):
        forked = [save(figure(f"series {i}"), tmp_path / "forked" / f"f{i}.png",
                       *figure_legend(f"series {i}")) for i in range(3)]
    assert [p.read_bytes() for p in forked] == [p.read_bytes() for p in here]
    assert not [p for p in (tmp_path / "forked").iterdir() if p.name.startswith(".")]  # no temporary left


def figure_legend(label: str) -> tuple[list[object], list[str], str]:
    from matplotlib.lines import Line2D

    return [Line2D([], [], marker="o")], [label], "legend"


def test_done_runs_here_once_the_child_has_written(tmp_path: Path) -> None:
    seen: list[tuple[str, bool]] = []
    with forking(limit=2):
        for name in ("a", "b", "c"):
            out = tmp_path / name
            in_child(out, lambda o=out: o.write_text(str(os.getpid())),
                   lambda o=out, n=name: seen.append((n, o.exists())))
    assert sorted(seen) == [("a", True), ("b", True), ("c", True)]
    assert all(int((tmp_path / n).read_text()) != os.getpid() for n in "abc")  # written elsewhere: a child


@pytest.mark.parametrize("limit", [None, 1])
def test_outside_the_block_or_on_one_core_it_renders_here(tmp_path: Path, limit: int | None) -> None:
    out = tmp_path / "here.png"
    done: list[bool] = []
    if limit is None:
        in_child(out, lambda: out.write_text(str(os.getpid())), lambda: done.append(True))
    else:
        with forking(limit=limit):
            in_child(out, lambda: out.write_text(str(os.getpid())), lambda: done.append(True))
    assert int(out.read_text()) == os.getpid() and done == [True]


def test_work_is_queued_until_start_then_one_child_per_core_runs_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from studyctl.analysis import forked

    forks: list[int] = []
    fork = os.fork
    monkeypatch.setattr(forked.os, "fork", lambda: forks.append(1) or fork())
    with forking(limit=2) as children:
        assert children is not None
        for i in range(5):
            in_child(tmp_path / f"{i}", lambda i=i: (tmp_path / f"{i}").write_text(str(os.getpid())), lambda: None)
        assert forks == [] and not list(tmp_path.iterdir())  # queued: nothing forked, nothing made
        children.start()
        assert len(forks) == 2 and not children.queued
        assert gc.get_freeze_count() > 0  # what the children share is out of the collector's walks meanwhile
    pids = {(tmp_path / f"{i}").read_text() for i in range(5)}
    assert len(pids) == 2 and str(os.getpid()) not in pids  # five files made by two children
    assert gc.get_freeze_count() == 0  # and collected again once they are done


def test_a_block_that_fails_starts_nothing_more(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bad ratio"), forking(limit=2):
        in_child(tmp_path / "late.png", lambda: (tmp_path / "late.png").write_bytes(b"png"), lambda: None)
        raise ValueError("bad ratio")
    assert not (tmp_path / "late.png").exists()


def test_a_failing_child_is_named_and_its_file_not_recorded(tmp_path: Path) -> None:
    recorded: list[str] = []

    def fail() -> None:
        raise ValueError("no glyph")

    with pytest.raises(RuntimeError, match=r"making outputs failed: bad\.png \(exit 1\)$"), forking(limit=2):
        for name in ("good0", "bad", "good2", "good3"):  # the bad one shares its child with good3, which still runs
            in_child(tmp_path / f"{name}.png", fail if name == "bad" else
                     lambda n=name: (tmp_path / f"{n}.png").write_bytes(b"png"), lambda n=name: recorded.append(n))
    assert sorted(recorded) == ["good0", "good2", "good3"]


def _outputs(study: Path) -> dict[str, bytes]:
    """Every table, PNG and problems file a collect left, and its output memos (not the report: it names its time;
    not the parse cache and kept frames: they name the study directory)."""
    made = [p for p in sorted(study.rglob("*")) if p.is_file() and p.relative_to(study).parts[0] in ("tables", "plots")]
    return {str(p.relative_to(study)): p.read_bytes() for p in made
            if (p.suffix in (".csv", ".parquet", ".png", ".json") and p.parent.name != ".cache")
            or p.name in ("plots.json", "tables.json")}


@pytest.mark.parametrize("cores", [1, 2])
def test_a_collect_makes_the_same_files_in_children_as_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             cores: int) -> None:
    import shutil

    from studyctl.analysis import forked
    from studyctl.analysis.collect import collect
    from tests.resultgen import make_point, write_result

    base = tmp_path / "base" / "study"
    for nodes in (1, 2, 4):
        for rep in range(2):
            write_result(base, make_point(nodes=nodes, rep=rep), [2.0 * nodes, 2.1 * nodes], [2.5 * nodes])
    shutil.copytree(base, tmp_path / "here")
    monkeypatch.setattr(forked, "cores", lambda: 1)
    collect(tmp_path / "here")
    shutil.copytree(base, tmp_path / "there")
    monkeypatch.setattr(forked, "cores", lambda: cores)
    made: list[int] = []
    fork = os.fork
    monkeypatch.setattr(forked.os, "fork", lambda: made.append(1) or fork())
    collect(tmp_path / "there")
    here, there = _outputs(tmp_path / "here"), _outputs(tmp_path / "there")
    assert any(n.endswith(".png") for n in here) and any(n.endswith(".parquet") for n in here)
    assert "tables/.cache/tables.json" in here and "problems.json" in {Path(n).name for n in here}
    assert sorted(there) == sorted(here)
    memos = [n for n in here if n.startswith("tables/.cache/")]
    assert [n for n in here if n not in memos and here[n] != there[n]] == []
    # a memo records each file's digest beside its stamp (inode, mtime: a copy's own): the digests are the same
    for name in memos:
        assert ({k: v[0] for k, v in json.loads(there[name])["plots"].items()}
                == {k: v[0] for k, v in json.loads(here[name])["plots"].items()}), name
    kept = sorted(p.name for p in (tmp_path / "here" / "tables" / ".cache").iterdir())
    assert "frames.checkpoints.arrow" in kept  # the kept frames too (written by children while tables are built)
    assert sorted(p.name for p in (tmp_path / "there" / "tables" / ".cache").iterdir()) == kept
    assert (len(made) > 0) == (cores > 1)  # with two cores the PNGs and tables were made by children


def test_a_system_error_in_a_child_is_raised_here_as_here_without_a_traceback(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    import errno

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "ranks.parquet"))

    with pytest.raises(OSError) as got, forking(limit=2):
        in_child(tmp_path / "tables", full, lambda: None)
        in_child(tmp_path / "a.png", lambda: (tmp_path / "a.png").write_bytes(b"png"), lambda: None)
    assert (got.value.errno, got.value.strerror, got.value.filename) == (
        errno.ENOSPC, "No space left on device", str(tmp_path / "ranks.parquet"))
    assert "Traceback" not in capfd.readouterr().err  # the user's one line is the caller's to print
    assert (tmp_path / "a.png").exists()


def test_nothing_is_forked_while_the_caller_runs_threads_of_its_own(tmp_path: Path) -> None:
    import threading

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with forking(limit=2) as children:
            in_child(tmp_path / "a", lambda: (tmp_path / "a").write_text(str(os.getpid())), lambda: None)
        assert children is None and int((tmp_path / "a").read_text()) == os.getpid()  # made here
    finally:
        stop.set()
        other.join()


def test_where_no_child_can_be_forked_the_work_is_done_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from studyctl.analysis import forked

    def no_process() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(forked.os, "fork", no_process)
    done: list[str] = []
    with forking(limit=2):
        for name in ("a", "b", "c"):
            in_child(tmp_path / name, lambda n=name: (tmp_path / n).write_text(str(os.getpid())),
                     lambda n=name: done.append(n))
    assert sorted(done) == ["a", "b", "c"]
    assert {(tmp_path / n).read_text() for n in "abc"} == {str(os.getpid())}
    assert gc.get_freeze_count() == 0
