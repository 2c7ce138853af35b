"""`studyctl mlperf STUDY [--rules v2.0|v3.0] [--out DIR]`: the MLPerf Storage view (each rule pass, fail or
unknown, with why; MLPerf units), and on request a v3.0-shaped results tree."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from studyctl.cli.common import ResultsOpt, guard, out, styled

STYLE = {"pass": "green", "unknown": "yellow", "fail": "red"}


def mlperf(study_ref: Annotated[str, typer.Argument(metavar="STUDY")], results: ResultsOpt = Path("results"),
           rules: Annotated[str, typer.Option(help="the MLPerf Storage rules to judge by [v2.0|v3.0]")] = "v3.0",
           out_dir: Annotated[Path | None, typer.Option(
               "--out", help="also write a v3.0-shaped results tree per model here (a new or empty directory, "
                             "or one an earlier --out wrote)")] = None) -> None:
    """How far each model's points are from MLPerf Storage checkpointing's CLOSED rules, and their figures."""
    from studyctl import api

    def run() -> None:
        verdicts, html, md = api.mlperf_report(study_ref, results, rules=rules, out=out_dir)
        for v in verdicts:
            out.print(styled(f"{v.model}: ", (v.headline(), STYLE[v.status]), v.reasons()))
        if not verdicts:
            out.print("no results yet")
        out.print(f"MLPerf view: {html}")
        out.print(f"MLPerf view (Markdown): {md}")
        if out_dir is not None:
            out.print(f"MLPerf results tree: {out_dir}")

    guard(run)
