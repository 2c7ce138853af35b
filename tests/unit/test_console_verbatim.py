"""What the CLI prints from data or the environment (paths, point directory names, reasons) comes out as the same
characters: '[/x]' no longer crashes a command (rich MarkupError), '[project]' or '[bold]' no longer vanish,
':smile:' stays text. Generated studies, in-process CLI; submit and status run for real in
tests/integration/test_collect_together.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.resultgen import make_point, write_error
from tests.unit.test_output_dirs import study

HOSTILE = "r [/x] [bold]b[/bold] [project] [red]:smile:"  # as a path: directories 'r [' and 'x] [bold]b[', ...
POINT_DIR = "p[bold]x[project][red]:smile:"  # a directory name: no "/", so no closing tag


@pytest.fixture
def results(tmp_path: Path) -> Path:
    results = tmp_path / HOSTILE
    study(results, "base")
    got = study(results, "got")
    bad = got / "points" / POINT_DIR / "attempt-1"
    bad.mkdir(parents=True)
    (bad / "result.json").write_text("{")
    write_error(got, make_point(nodes=8), 1, "io_error", "disk [/x] full at [project] [bold]")
    return results


def test_collect_prints_paths_and_point_names_verbatim(results: Path) -> None:
    res = run_cli("collect", "got", "--results", str(results))
    assert res.returncode == 0, res.stderr
    assert f"tables: {results}/got/tables\n" in res.stdout
    assert f"report: {results}/got/report.html\n" in res.stdout
    assert f"unusable result: point {POINT_DIR} attempt 1: not valid JSON" in res.stdout
    assert "worker error: point" in res.stdout and "io_error: disk [/x] full at [project] [bold]\n" in res.stdout


def test_compare_and_mlperf_print_paths_verbatim(results: Path) -> None:
    res = run_cli("compare", "base", "got", "--results", str(results))
    assert res.returncode == 0, res.stderr
    assert f"output: {results}/got/compare/base/comparison.csv\n" in res.stdout
    res = run_cli("mlperf", "got", "--results", str(results))
    assert res.returncode == 0, res.stderr
    assert f"MLPerf view: {results}/got/mlperf.html\n" in res.stdout
    assert "gpt2-125m: meets CLOSED" in res.stdout or "gpt2-125m: does not meet CLOSED" in res.stdout


def test_an_error_naming_a_hostile_path_is_one_verbatim_line(results: Path) -> None:
    res = run_cli("collect", "nothere [/x]", "--results", str(results))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "nothere [/x]" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("sweep", "submit", str(results / "missing [bold].yaml"), "--results", str(results))
    assert res.returncode == 2 and f"{results}/missing [bold].yaml" in res.stderr


def test_plan_prints_reasons_and_paths_verbatim(tmp_path: Path) -> None:
    fs = tmp_path / HOSTILE / "fs"
    fs.mkdir(parents=True)
    sweep = tmp_path / HOSTILE / "s.yaml"
    sweep.write_text(f"study: s\nmodels: [gpt2-125m]\nmatrix: {{nodes: [1, 2]}}\n"
                     f"filesystems: {{scratch: {{path: '{fs}'}}}}\n"
                     "exclude:\n  - {nodes: 2, reason: 'no [/x] [project] [bold]here:smile:'}\n"
                     "checkpoint: {scale: 0.01}\nceilings: off\ncalibration: off\n")
    res = run_cli("plan", str(sweep))
    assert res.returncode == 0, res.stderr
    assert "  excluded ×1: no [/x] [project] [bold]here:smile:\n" in res.stdout
    assert "2 points: 1 to run, 1 excluded" in res.stdout


def test_models_still_prints_the_catalog() -> None:
    res = run_cli("models")
    assert res.returncode == 0 and "gpt2-125m" in res.stdout and "llama3-70b" in res.stdout
