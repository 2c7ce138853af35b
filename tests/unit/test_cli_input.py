"""Numeric options out of range are usage errors (exit 2, no traceback), before anything is read or run."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.cli import REPO, run_cli

QUICKSTART = str(REPO / "sweeps" / "quickstart.yaml")


@pytest.mark.parametrize("args", [
    ("sweep", "status", "any", "--watch", "--interval", "-1"),
    ("sweep", "status", "any", "--interval", "0"),
    ("sweep", "status", "any", "--limit", "-3"),
    ("sweep", "resubmit", "any", "--max-attempts", "0"),
    ("sweep", "submit", QUICKSTART, "--budget-node-hours", "-1"),
    ("plan", QUICKSTART, "--limit", "-1"),
])
def test_out_of_range_options_are_usage_errors(args: tuple[str, ...], tmp_path: Path) -> None:
    res = run_cli(*args, "--results", str(tmp_path / "results")) if args[0] == "sweep" else run_cli(*args)
    output = res.stdout + res.stderr
    assert res.returncode == 2, output
    assert "Traceback" not in output
    option = next(a for a, value in itertools.pairwise(args) if a.startswith("--") and not value.startswith("--"))
    assert f"Invalid value for '{option}'" in output  # refused for the option, not for the unknown study
    assert not (tmp_path / "results").exists()
