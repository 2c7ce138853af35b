"""`studyctl mlperf STUDY`: the MLPerf Storage view (rules pass/fail with why, MLPerf units)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from studyctl.cli.common import ResultsOpt, guard, out, styled


def mlperf(study_ref: Annotated[str, typer.Argument(metavar="STUDY")], results: ResultsOpt = Path("results")) -> None:
    """Whether each model's points meet MLPerf Storage v2.0 checkpointing's CLOSED rules, and their figures."""
    from studyctl import api

    def run() -> None:
        verdicts, html, md = api.mlperf_report(study_ref, results)
        for v in verdicts:
            mark = ("meets CLOSED", "green") if v.passed else ("does not meet CLOSED", "red")
            out.print(styled(f"{v.model}: ", mark, "" if v.passed else f" (no point met: {', '.join(v.unmet())})"))
        if not verdicts:
            out.print("no results yet")
        out.print(f"MLPerf view: {html}")
        out.print(f"MLPerf view (Markdown): {md}")

    guard(run)
