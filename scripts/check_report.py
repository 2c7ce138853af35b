"""Checks what the main job promises in every cell of each study's report: a 95% CI over its repetitions, a share
of its shape's measured ceiling with its 95% CI and a projection to full size fitted from two or more scales (not
plain scaling).

    python scripts/check_report.py RESULTS_ROOT STUDY...

Reads each study's tables/summary.csv (what report.md is rendered from); one line per study, and one per cell
missing something. Exit 1 when a cell misses something, 2 when a table cannot be read. After the main job:
`python scripts/check_report.py results quickstart quickstart-strategies`.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

# what a cell shows, as the summary table's columns: (column, what it is, test of a value)
SHOWN = (
    ("bytes_over_time_GiBps_ci95", "95% CI", lambda v: _number(v) is not None),
    ("ceiling_share", "ceiling share", lambda v: _number(v) is not None),
    ("ceiling_share_low", "ceiling share's 95% CI", lambda v: _number(v) is not None),
    ("projection_basis", "fitted projection", lambda v: isinstance(v, str) and v.startswith("fit ")),
)
KEYS = ("nodes", "ranks_per_node", "io_mode", "strategy", "phase")  # how a cell is named in the lines


def _number(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def missing(summary: pd.DataFrame) -> list[str]:
    """One line per measured cell × phase that lacks something the report promises."""
    lines = []
    cells = summary[summary["role"] == "measure"] if "role" in summary.columns else summary
    for _, row in cells.iterrows():
        lacks = [what for column, what, shown in SHOWN if not shown(row.get(column))]
        if lacks:
            name = ", ".join(f"{k} {row[k]}" for k in KEYS if k in row.index)
            lines.append(f"  {name}: lacks {', '.join(lacks)}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root, studies = Path(argv[0]), argv[1:]
    failed = False
    for study in studies:
        path = root / study / "tables" / "summary.csv"
        try:
            summary = pd.read_csv(path)
        except (OSError, ValueError) as exc:
            print(f"{path}: cannot read the summary table ({exc})", file=sys.stderr)
            return 2
        absent = [column for column, _, _ in SHOWN if column not in summary.columns]
        if absent or summary.empty:
            print(f"{path}: {'no rows' if summary.empty else 'no column ' + ', '.join(absent)}", file=sys.stderr)
            return 2
        lines = missing(summary)
        cells = len(summary[summary["role"] == "measure"]) if "role" in summary.columns else len(summary)
        if lines:
            failed = True
            print(f"{study}: {len(lines)} of {cells} cell × phase rows lack what the report promises:")
            print("\n".join(lines))
        else:
            print(f"{study}: every cell × phase row ({cells}) has a 95% CI, a ceiling share and a fitted projection")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
