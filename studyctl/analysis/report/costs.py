"""The report's "What checkpoints cost training" section: cells with CIs and flags, rankings, and the inputs.

A function of the training and summary tables alone; every input of the cost model is stated, and every
projection says from what.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from studyctl.analysis.tables import Tables
from studyctl.analysis.training.cells import PROJECTED_PHASES, display_axes, strategy_rankings
from studyctl.analysis.training.cost import BAND_FIGURES, PLAIN
from studyctl.analysis.values import missing
from studyctl.units import format_bytes

SHARES = ("checkpoint_share", "total_waste", "total_waste_at_daly", "goodput")  # banded figures shown in percent
MAX_DIGITS = 7


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 60:.3g} min" if seconds >= 60 else f"{seconds:.3g} s"


def _distinct(t: pd.DataFrame, col: str) -> list[Any]:
    return sorted({v for v in t[col].dropna().tolist()}) if col in t else []


def _interval(t: pd.DataFrame) -> str:
    interval, steps = float(t["interval_s"].iloc[0]), t["interval_steps"].dropna()
    how = (f"{int(steps.iloc[0])} steps × {float(t['real_step_s'].iloc[0]):g} s (the real run's step)"
           if len(steps) else "training.interval_min")
    return f"{_duration(interval)} of compute between checkpoints ({how})"


def _failures(t: pd.DataFrame) -> str:
    nodes = ", ".join(f"{int(n)}" for n in _distinct(t, "job_nodes"))
    mtbf = ", ".join(_duration(m) for m in _distinct(t, "job_mtbf_s"))
    if t["node_mtbf_h"].notna().any():
        return f"node MTBF {float(t['node_mtbf_h'].iloc[0]):g} h; job of {nodes} node(s) → job MTBF {mtbf}"
    if t["job_failures_per_day"].notna().any():
        return f"{float(t['job_failures_per_day'].iloc[0]):g} job failures a day → job MTBF {mtbf}"
    return "none given (training.node_mtbf_h or job_failures_per_day): total waste counts checkpoints only"


def _scale(t: pd.DataFrame) -> list[tuple[str, str]]:
    measured = _distinct(t, "nodes")
    rows = []
    job = _distinct(t, "job_nodes")
    if job and measured and max(job) > max(measured):
        rows.append(("scale of the job", f"per-node rates measured on {', '.join(str(int(n)) for n in measured)} "
                     f"node(s) assumed to hold at {', '.join(str(int(n)) for n in job)} nodes (times as measured, "
                     "failure rate of the larger job)"))
    scales = ", ".join(f"{s:g}" for s in _distinct(t, "scale"))
    nominal = ", ".join(dict.fromkeys(format_bytes(b) for b in _distinct(t, "nominal_checkpoint_bytes")[:4]))
    written = ", ".join(dict.fromkeys(format_bytes(b) for b in _distinct(t, "checkpoint_bytes")[:4]))
    rows.append(("bytes", f"scale {scales}: nominal (full-size) checkpoint {nominal}; written {written}"))
    if bool(t["projected"].any()):
        rows.append(("projections", _projections(t)))
    return rows


def _projections(t: pd.DataFrame) -> str:
    """How the seconds were brought to full size: the fit where the study's runs give one, else plain scaling."""
    fitted = "projection_basis" in t and bool((t["projection_basis"] != PLAIN).any())
    plain = "projection_basis" not in t or bool((t["projection_basis"] == PLAIN).any())
    parts = []
    if fitted:
        parts.append("fitted (fixed + per file + bytes / bandwidth, every part ≥ 0, per resource shape, from runs at "
                     "two or more scales, calibration points included): blocked, interference, background and durable "
                     "lag, and the restore, × fitted full-size time / fitted time at the run's size; [low, high] "
                     "beside a figure is the fit's 95% band carried through the model (each figure at the band's "
                     "ends; a share of wall time held to [0, 1]), and \"full size from\" names the largest scale "
                     "each phase's fit rests on and how far it reaches beyond it")
    if plain:
        parts.append("plain scaling where no fit exists (time assumed ∝ bytes, pessimistic where fixed costs "
                     "dominate the small run): the same seconds × nominal / written checkpoint bytes, the restore × "
                     "its nominal / measured bytes")
    return ("; ".join(parts) + "; file reads and broadcasts each by their own bytes. Every figure is then "
            "computed per repetition and pooled (95% CI).")


def _steps(t: pd.DataFrame) -> str:
    bg = t[t["strategy"] != "sync"]
    if bg.empty:
        return "none: sync checkpoints only (no background work)"
    parts = {f"{s:g} s ({c or 'cpu'} model{f', {a:g} MiB all-reduce per step and rank' if a == a and a else ''})"
             for s, c, a in zip(bg["step_s"], bg.get("compute", [None] * len(bg)),
                                bg.get("allreduce_mib", [float("nan")] * len(bg)), strict=True) if s == s}
    return "; ".join(sorted(parts)) + " beside each async persist or tier drain"


def _restart(t: pd.DataFrame) -> str:
    sources = _distinct(t, "relaunch_source")
    launch = _distinct(t, "relaunch_s")
    shown = f"{launch[0]:.3g} s" if len(launch) == 1 else f"{launch[0]:.3g}–{launch[-1]:.3g} s" if launch else "–"
    return (f"relaunch {shown} ({', '.join(sources)}) + the restore after a failure (tiered: one node lost its "
            "tier; see the flags)")


def assumptions(t: pd.DataFrame) -> list[tuple[str, str]]:
    """The cost model's inputs, as (name, statement) lines."""
    return [("model", "Daly's complete model: total waste = checkpoints + rework + restarts; "
             "C = blocked + interference (signed mean) + any wait for a persist longer than the interval; "
             "L (durable lag) = the real background time"),
            ("interval", _interval(t)), ("failures", _failures(t)), ("simulated step", _steps(t)),
            ("restart R", _restart(t)), *_scale(t), *_engines(t)]


def _engines(t: pd.DataFrame) -> list[tuple[str, str]]:
    """What blocked, staged and L mean for a cell whose checkpoint goes through a framework (none: stream only)."""
    engines = [e for e in _distinct(t, "engine") if e != "stream"]
    if not engines:
        return []
    return [("engines", f"{', '.join(engines)}: blocked = the engine's save (sync), or its async call (torch_save: "
             "the host snapshot; dcp: async_save's return); staged = from that call until the state was copied off "
             "the live tensors (a background stager's copy runs beside training, its cost shows as interference); "
             "L = the engine's persist, until its files were complete")]


def band_text(row: dict[str, Any], figure: str) -> str:
    """` [low, high]`: the fit's band of one figure (shares in percent), to the significant digits it takes to tell
    its ends apart (a goodput of 99.97–99.99%) and never a positive end printed as 0; empty where it has none."""
    lo, hi = row.get(f"{figure}_lo", math.nan), row.get(f"{figure}_hi", math.nan)
    if missing(lo) or missing(hi):
        return ""
    scale, unit = (100.0, "%") if figure in SHARES else (1.0, "")
    low, high = float(lo) * scale, float(hi) * scale
    digits = 3
    while _significant(low, digits) == _significant(high, digits) and digits < MAX_DIGITS:
        digits += 1
    return f" [{_significant(low, digits)}{unit}, {_significant(high, digits)}{unit}]"


def _significant(x: float, digits: int) -> str:
    """`digits` significant digits, whole numbers as they are (4216, not 4.22e+03)."""
    return f"{x:.0f}" if abs(x) >= 10 ** (digits - 1) else f"{x:.{digits}g}"


def rests_on(row: dict[str, Any]) -> str:
    """Per projected phase: the fit's largest scale and its reach, or plain scaling's factor; flagged beyond 10×."""
    parts = []
    for phase, figure, seconds in PROJECTED_PHASES:
        reach, scale = row.get(f"{phase}_reach", math.nan), row.get(f"{phase}_scale_max", math.nan)
        if missing(row.get(seconds)) or missing(reach):
            continue
        how = f"fit ≤ scale {float(scale):g}" if row.get(f"{phase}_fitted") else f"plain, scale {float(scale):g}"
        flag = " (flagged)" if any(f.startswith(f"{figure}:") for f in str(row.get("flags", "")).split("; ")) else ""
        parts.append(f"{figure} {how}, reach {float(reach):.3g}×{flag}")
    return "; ".join(parts) or "–"


def cost_section(tables: Tables) -> dict[str, Any]:
    """axes, rows (one per cell), rankings and assumptions; empty rows when nothing was costed."""
    cells = tables.training_cells
    if cells.empty:
        return {"axes": [], "rows": [], "rankings": [], "assumptions": [], "staged": False}
    axes = display_axes(cells) or ["model"]
    rows = [{**r, "band": {f: band_text(r, f) for f in BAND_FIGURES}, "rests_on": rests_on(r)}
            for r in cells.sort_values(axes, key=lambda s: s.astype(str)).to_dict("records")]
    staged = "staged_s" in cells and bool(cells["staged_s"].notna().any())
    return {"axes": axes, "rows": rows, "rankings": strategy_rankings(cells, axes), "staged": staged,
            "assumptions": assumptions(tables.training[tables.training["checkpoint_cost_s"].notna()])}
