"""Which ceiling a cell × phase is judged against, like with like, and its share's 95% interval.

A write is judged against its own shape's probe (the same I/O mode, written and fsynced: the durable write probe).
A restore is judged against a probe that read the same way: its own shape's where that probe used the restore's
cold-read method, else the probe of the same nodes, ranks, filesystem and block in another I/O mode that did (an
O_DIRECT read of buffered-written files against the direct shape's probe); where none did, there is no like
ceiling, and the cell says so rather than borrow another method's figure. A warm restore (cold read none) keeps
its shape's cold probe: the page-cache rules judge it. The share's interval propagates both the cell's CI and the
ceiling's (`stats.ratio_ci`, on the log scale, df the smaller side's).
"""

from __future__ import annotations

import typing
from typing import Any

import pandas as pd

from studyctl.analysis.cells import HEADLINE
from studyctl.analysis.columns import RESIDENCY_COLUMNS
from studyctl.analysis.stats import ratio_ci
from studyctl.analysis.values import missing
from studyctl.definition.checkpoint.points import IoMode
from studyctl.definition.planning.shapes import Shape

NAN = float("nan")
IO_MODES: tuple[str, ...] = typing.get_args(IoMode)


def shape_key(row: dict[str, Any], io_mode: str | None = None) -> str | None:
    """The resource shape of a summary row (optionally in another I/O mode); None for an imported DLIO row."""
    values: list[Any] = [row.get(c) for c in ("nodes", "ranks_per_node", "filesystem", "io_mode", "block_mib")]
    if any(missing(v) for v in values):
        return None
    return Shape(int(values[0]), int(values[1]), str(values[2]), io_mode or str(values[3]), int(values[4])).key


def like_ceiling(row: dict[str, Any], shapes: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    """(the shape ceiling this cell × phase is judged against, why there is none where a probe exists but read
    another way)."""
    own = shapes.get(shape_key(row) or "", {})
    method = str(row.get("cold_read_method"))
    if row.get("phase") != "read" or not own or method == "none" or own.get("cold_read_method") in (None, method):
        return own, None
    for mode in (str(row.get("io_mode")), *IO_MODES):
        other = shapes.get(shape_key(row, mode) or "", {})
        if other.get("cold_read_method") == method:
            return other, None
    return {}, (f"no ceiling probe of this shape read as the restore did ({method}; the shape's probe read "
                f"{own.get('cold_read_method')}): no like-with-like ceiling")


def phase_ceiling(row: dict[str, Any], ceiling: dict[str, Any]) -> dict[str, Any]:
    """The phase's storage ceiling and its interval, the even one, and the share of each with its interval."""
    phase = str(row["phase"])
    value, n = _num(row.get(HEADLINE)), count(row.get("n"))
    se = _num(row.get(f"{HEADLINE}_se"))
    out: dict[str, Any] = {"ceiling_method": ceiling.get("cold_read_method")}
    for prefix, rate in (("ceiling", f"storage_{phase}_GiBps"), ("even_ceiling", f"even_{phase}_GiBps")):
        top = _num(ceiling.get(rate))
        rounds = count(ceiling.get(f"{rate}_rounds"))
        _, low, high = ratio_ci(top, top * _num(ceiling.get(f"{rate}_se_log")), value, se, min(n, rounds) - 1)
        out.update({f"{prefix}_GiBps": ceiling.get(rate), f"{prefix}_GiBps_low": _num(ceiling.get(f"{rate}_low")),
                    f"{prefix}_GiBps_high": _num(ceiling.get(f"{rate}_high")), f"{prefix}_rounds": rounds,
                    f"{prefix}_share_low": low, f"{prefix}_share_high": high})
    return out


def _num(v: Any) -> float:
    return NAN if missing(v) else float(v)


def count(v: Any) -> int:
    """A count from a table cell: 0 where missing (None, NaN)."""
    return 0 if missing(v) else int(v)


def residency(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Per cell_key × phase: pages resident before the read and pages sampled, summed over the sampled reads
    (absent where no read was sampled)."""
    if checkpoints.empty or not set(RESIDENCY_COLUMNS) <= set(checkpoints.columns):
        return pd.DataFrame(columns=["cell_key", "phase", *RESIDENCY_COLUMNS])
    cols = {c: pd.to_numeric(checkpoints[c], errors="coerce") for c in RESIDENCY_COLUMNS}
    frame = checkpoints[["cell_key", "phase"]].assign(**cols).dropna(subset=["pages_sampled"])
    return frame.groupby(["cell_key", "phase"], as_index=False)[list(RESIDENCY_COLUMNS)].sum()
