"""The command line (Typer only): parse, call one api function, print."""

from studyctl.cli import mlperf  # noqa: F401  registers `studyctl mlperf`
from studyctl.cli.app import main

__all__ = ["main"]
