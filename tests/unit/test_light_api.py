"""Planning and following a study load no analysis stack: each command runs in a fresh interpreter, through the
real entry point, and what it imported is read from `sys.modules` when it has finished.

`sweep status` went from 1.5 s to under 0.5 s on a 1,000-point study mostly by not importing pandas, matplotlib
and jinja2 (benchmarks/status_speed.py times it); this is the behaviour behind that figure, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.studygen import build_study

REPO = Path(__file__).resolve().parents[2]
ANALYSIS_STACK = ("pandas", "matplotlib", "jinja2", "pyarrow", "numpy")
SCHEDULER_CLIENT = ("submitit",)  # only a Slurm study's commands need it
RUN = """
import json, runpy, sys
sys.argv = ["studyctl", *json.loads(sys.argv[1])]
code = 0
try:
    runpy.run_module("studyctl.cli", run_name="__main__")
except SystemExit as stop:
    code = stop.code or 0
print("LOADED " + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def loaded(*args: str, cwd: Path = REPO) -> tuple[int, set[str], str]:
    """(exit code, top-level packages imported, output) of `studyctl ARGS` run to its end in a new interpreter."""
    proc = subprocess.run([sys.executable, "-c", RUN, json.dumps(list(args))], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("LOADED "))
    found = json.loads(line.removeprefix("LOADED "))
    return found["code"], {m.split(".")[0] for m in found["modules"]}, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_study(tmp_path_factory.mktemp("light"), 40, "light").root


@pytest.mark.parametrize("args", [
    ("sweep", "status", "{study}"),
    ("sweep", "status", "{study}", "--json"),
    ("sweep", "cancel", "{study}"),
    ("sweep", "resubmit", "{study}", "--max-attempts", "1"),  # every failed point is at 1: nothing runs
    ("plan", "{repo}/sweeps/quickstart.yaml"),
    ("plan", "{repo}/sweeps/quickstart.yaml", "--json"),
    ("sweep", "submit", "{repo}/sweeps/quickstart.yaml", "--dry-run"),
    ("models",),
], ids=lambda a: " ".join(a))
def test_planning_and_following_a_study_load_no_analysis_stack(study: Path, args: tuple[str, ...]) -> None:
    """Run where no earlier `collect` left tables (plan reads them, with pandas, for projections when they exist:
    a checkout where the quickstart ran has them under results/)."""
    code, packages, output = loaded(*(a.format(study=study, repo=REPO) for a in args), cwd=study.parent)
    assert code in (0, 1), output  # 1: the study has FAILED points, as `sweep resubmit` says
    assert "Traceback" not in output
    heavy = packages & {*ANALYSIS_STACK, *SCHEDULER_CLIENT}
    assert not heavy, f"{' '.join(args)} imported {sorted(heavy)}"
    assert {"studyctl", "pydantic", "sqlite3" if args[0] == "sweep" else "yaml"} <= packages  # it did run


def test_the_check_sees_what_a_command_imports(study: Path) -> None:
    """The probe is not blind: collect, which does need the analysis stack, is seen loading it."""
    _, packages, output = loaded("collect", str(study), "--results", str(study.parent))
    assert {"pandas", "matplotlib", "jinja2"} <= packages, output
    assert "Traceback" not in output
