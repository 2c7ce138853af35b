"""The one way tests run the command line: in-process through Typer's runner, or as a real process."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, cwd: Path | None = None, subprocess_: bool = False, timeout: float = 300) -> CliRun:
    """`studyctl ARGS`. In-process unless the test needs a real process (signals, cwd, a fresh interpreter)."""
    if subprocess_ or cwd is not None:
        proc = subprocess.run([sys.executable, "-m", "studyctl.cli", *args], capture_output=True, text=True,
                              cwd=cwd, timeout=timeout)
        return CliRun(proc.returncode, proc.stdout, proc.stderr)
    from studyctl.cli.app import app

    res = CliRunner().invoke(app, list(args))
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return CliRun(res.exit_code, res.stdout, res.stderr)
