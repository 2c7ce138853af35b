"""The command line: the Typer app and its commands, one file per command group (parse, call api, print)."""

from __future__ import annotations

from typing import Annotated

import typer

from studyctl.cli import analysis, mlperf, models, plan, sweep
from studyctl.cli.common import STATE

# Help text and usage errors verbatim (no rich markup): "[cold|warm]" in a help string stays text (see cli.common).
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Plan, run and report scaling studies of LLM checkpoint I/O.")
sweep_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="Run a study: submit, status, resubmit, cancel.")
app.add_typer(sweep_app, name="sweep")


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False) -> None:
    STATE["debug"] = debug


app.command("models")(models.models)
app.command("plan")(plan.plan)
sweep_app.command("submit")(sweep.sweep_submit)
sweep_app.command("status")(sweep.sweep_status)
sweep_app.command("resubmit")(sweep.sweep_resubmit)
sweep_app.command("cancel")(sweep.sweep_cancel)
app.command("collect")(analysis.collect)
app.command("compare")(analysis.compare)
app.command("mlperf")(mlperf.mlperf)


def main() -> None:
    app()
