"""`studyctl collect` and `studyctl compare`: tables, plots, report; one study against another."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from studyctl.cli.common import ResultsOpt, guard, out


def collect(
    study_ref: Annotated[str, typer.Argument(metavar="STUDY")],
    results: ResultsOpt = Path("results"),
    import_dlio: Annotated[list[Path] | None, typer.Option(
        help="a DLIO output dir (summary.json) to add; repeat for several runs")] = None,
    dlio_reads: Annotated[str, typer.Option(
        help="how the imported DLIO runs' reads ran [warm|cold]: warm, DLIO reads right after writing (page "
             "cache); cold, you cleared the page cache before reading (stated, not verified)")] = "warm",
    ratio: Annotated[list[str] | None, typer.Option(
        help="AXIS=BASELINE, e.g. io_mode=buffered: each other value's ratio to the baseline, 95% CI; repeatable")
    ] = None,
) -> None:
    """Tables (CSV/Parquet), scaling plots (PNG) and a report (HTML/Markdown) from a study's results."""
    from studyctl import api

    def run() -> None:
        res = api.collect(study_ref, results, import_dlio or [], ratio or [], dlio_reads=dlio_reads)
        for line in res.summary_lines():
            out.print(line)

    guard(run)


def compare(
    study_a: Annotated[str, typer.Argument(metavar="STUDY_A")],
    study_b: Annotated[str, typer.Argument(metavar="STUDY_B")],
    results: ResultsOpt = Path("results"),
    threshold: Annotated[str, typer.Option(help="regression threshold, e.g. 5% or 0.05")] = "5%",
) -> None:
    """B against A on shared settings; exit 0 no regression, 1 a cell regressed (CI on both sides), 2 bad input
    or nothing comparable. A cell with one repetition on a side shows its ratio, not judged."""
    from studyctl import api

    def run() -> int:
        res = api.compare(study_a, study_b, results, threshold)
        for line in res.summary_lines():
            out.print(line)
        return 1 if res.any_regressed else 0

    code = guard(run)
    raise typer.Exit(code)
