"""What studyctl writes into a (received) study: real directories inside it, never through a symlink; files
replaced, never written through; the umask's mode; other writers' temporary files left alone.

Adversary: a study copied from someone else may have plots/, tables/, tables/.cache/ or compare/ as symlinks
to a directory of the receiver's, or an output file as a symlink to one of the receiver's files.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from studyctl.analysis.collect import collect
from studyctl.attempt.paths import StudyPaths
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text, owned_dir
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.resultgen import axis_study

KEEP = b"the receiver's own file\n"


def study(results: Path, name: str = "got", **kw: object) -> Path:
    """A generated study (2 ZeRO stages x 2 node counts x 3 repetitions) with an empty ledger: the CLI finds it."""
    root = results / name
    axis_study(root, "zero", (1, 3), **kw)  # type: ignore[arg-type]
    Ledger(root / "ledger.sqlite").close()
    return root


def victim(tmp_path: Path) -> Path:
    """A directory of the receiver's, with files collect would otherwise delete or overwrite."""
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("holiday.png", "summary.csv", "problems.json", "results.json", "outputs.json",
                 "comparison.csv", "ratio.png"):
        (mine / name).write_bytes(KEEP)
    return mine


def untouched(mine: Path) -> bool:
    return all(p.read_bytes() == KEEP for p in mine.iterdir()) and len(list(mine.iterdir())) == 7


@pytest.mark.parametrize("link", ["plots", "tables", "tables/.cache"])
def test_collect_refuses_a_symlinked_output_directory_and_touches_nothing(tmp_path: Path, link: str) -> None:
    root = study(tmp_path / "results")
    mine = victim(tmp_path)
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(mine)
    res = run_cli("collect", "got", "--results", str(tmp_path / "results"))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{root / link}: is a symlink (to {mine})" in lines[0]
    assert "Traceback" not in res.stderr
    assert untouched(mine)
    assert not StudyPaths(root).report_html.exists()  # refused before anything was written


def test_collect_refuses_a_symlinked_study_subdirectory_to_a_file_or_a_dangling_target(tmp_path: Path) -> None:
    root = study(tmp_path / "results")
    (root / "plots").symlink_to(tmp_path / "nowhere")  # dangling: mkdir through it would create it
    res = run_cli("collect", "got", "--results", str(tmp_path / "results"))
    assert res.returncode == 2 and "is a symlink" in res.stderr and not (tmp_path / "nowhere").exists()
    (root / "plots").unlink()
    (root / "plots").write_text("a file where a directory belongs")
    res = run_cli("collect", "got", "--results", str(tmp_path / "results"))
    assert res.returncode == 2 and f"{root / 'plots'}: not a directory" in res.stderr
    assert (root / "plots").read_text() == "a file where a directory belongs"


@pytest.mark.parametrize("link", ["compare", "compare/base"])
def test_compare_refuses_a_symlinked_output_directory(tmp_path: Path, link: str) -> None:
    results = tmp_path / "results"
    study(results, "base")
    b = study(results, "got")
    mine = victim(tmp_path)
    (b / link).parent.mkdir(parents=True, exist_ok=True)
    (b / link).symlink_to(mine)
    res = run_cli("compare", "base", "got", "--results", str(results))
    assert res.returncode == 2 and "is a symlink" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert untouched(mine)


def test_symlinked_output_files_are_replaced_never_written_through(tmp_path: Path) -> None:
    results = tmp_path / "results"
    study(results, "base")
    root = study(results, "got")
    paths = StudyPaths(root)
    outside = tmp_path / "mine"
    outside.mkdir()
    targets = [paths.report_html, paths.report_md, paths.problems, paths.tables / "summary.csv",
               paths.tables / "summary.parquet", paths.results_cache, paths.outputs_manifest,
               paths.plots / "rank_spread.png", paths.mlperf_html, paths.mlperf_md,
               paths.compared_with("base") / "comparison.csv", paths.compared_with("base") / "ratio.png"]
    for i, path in enumerate(targets):
        path.parent.mkdir(parents=True, exist_ok=True)
        (outside / f"{i}").write_bytes(KEEP)
        path.symlink_to(outside / f"{i}")
    assert run_cli("collect", "got", "--results", str(results)).returncode == 0
    assert run_cli("compare", "base", "got", "--results", str(results)).returncode == 0
    assert run_cli("mlperf", "got", "--results", str(results)).returncode == 0
    assert all(p.read_bytes() == KEEP for p in outside.iterdir())
    assert all(stat.S_ISREG(os.lstat(p).st_mode) and p.stat().st_size > 0 for p in targets)


def test_a_planted_symlink_at_a_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """The old fixed temporary names (.<stem>.tmp.png, .<name>.<pid>.tmp) were predictable; now none is."""
    root = study(tmp_path / "results")
    mine = victim(tmp_path)
    plots, tables = StudyPaths(root).plots, StudyPaths(root).tables
    plots.mkdir()
    tables.mkdir()
    (plots / ".rank_spread.tmp.png").symlink_to(mine / "holiday.png")
    for pid in range(os.getpid() - 2, os.getpid() + 3):
        (tables / f".summary.csv.{pid}.tmp").symlink_to(mine / "summary.csv")
    collect(root)
    assert untouched(mine)


def test_stale_plots_go_but_other_writers_temporaries_and_links_stay(tmp_path: Path) -> None:
    root = study(tmp_path / "results")
    plots = StudyPaths(root).plots
    plots.mkdir()
    stale, busy, link = plots / "bandwidth_gone.png", plots / ".io_mode.png.a1b2c3.tmp", plots / "elsewhere.png"
    hidden = plots / ".io_mode.tmp.png"
    for p in (stale, busy, hidden):
        p.write_bytes(b"x")
    link.symlink_to(tmp_path)
    made = collect(root)
    assert not stale.exists() and busy.exists() and hidden.exists() and link.is_symlink()
    assert {p.path.name for p in made.plots} <= {p.name for p in plots.glob("*.png")}


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o027, 0o077], ids=oct)
def test_every_file_collect_writes_has_the_umask_mode(tmp_path: Path, mask: int) -> None:
    root = study(tmp_path / "results")
    with umask(mask):
        collect(root, force=True)
        atomic_write_text(root / "sweep.yaml", "study: got\n")  # what submit, the worker and the ledger use
    paths = StudyPaths(root)
    written = [paths.report_html, paths.report_md, paths.problems, paths.results_cache, paths.outputs_manifest,
               root / "sweep.yaml", *paths.tables.glob("*.csv"), *paths.tables.glob("*.parquet"),
               *paths.plots.glob("*.png")]
    assert len(written) > 15
    modes = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written}
    assert set(modes.values()) == {oct(0o666 & ~mask)}, modes


def test_owned_dir_creates_real_directories_and_accepts_a_symlinked_study_root(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    made = owned_dir(tmp_path / "linked", tmp_path / "linked" / "tables" / ".cache")
    assert made.is_dir() and (real / "tables" / ".cache").is_dir() and not (real / "tables").is_symlink()
    assert owned_dir(tmp_path / "linked", tmp_path / "linked" / "compare" / "x", create=False)
    assert not (real / "compare").exists()  # create=False only checks
    with pytest.raises(UserError, match="outside the study"):
        owned_dir(real, real / ".." / "elsewhere")
