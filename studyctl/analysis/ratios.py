"""In-study ratios: each value of one axis against a baseline value, matched on every other setting.

`--ratio io_mode=buffered` gives, per phase and per combination of every other setting, the headline
(total bytes / total time) of direct and of hybrid over that of buffered, with a 95% interval from the
two cells' standard errors (`stats.ratio_ci`, log scale, df = min(n) − 1):
"direct / buffered write: 1.70× [1.50, 1.90]".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from studyctl.analysis.cells import DERIVED, HEADLINE, MEASURED, SETTINGS, independent, varying
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.stats import ratio_ci
from studyctl.analysis.values import file_stem, missing
from studyctl.errors import UserError


@dataclass(frozen=True)
class RatioSpec:
    axis: str
    baseline: str

    @property
    def name(self) -> str:
        return f"ratio_{self.axis}_{file_stem(self.baseline)}"


def shown_value(value: Any) -> str:
    """A setting's value as users write it: `none` for an unset one, `4` (not `4.0`) for a whole number."""
    if missing(value):
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_ratio(text: str, summary: pd.DataFrame) -> RatioSpec:
    """`AXIS=BASELINE`, checked against the study: the axis must vary and the baseline be one of its values."""
    axis, sep, baseline = text.partition("=")
    axis, baseline = axis.strip(), baseline.strip()
    axes = varying(summary, ("phase", "tool", *MEASURED, *DERIVED)) if not summary.empty else []
    if not sep or not baseline:
        raise UserError(f"--ratio {text!r}: expected AXIS=BASELINE, e.g. io_mode=buffered")
    if axis not in SETTINGS:
        raise UserError(f"--ratio {text!r}: {axis!r} is not a setting; settings are {', '.join(SETTINGS)}")
    if axis not in axes:
        raise UserError(f"--ratio {text!r}: {axis} does not vary in this study; axes that vary: "
                        f"{', '.join(axes) or 'none'}")
    values = sorted({shown_value(v) for v in summary[axis]})
    baseline = next((v for v in values if v.lower() == baseline.lower()), baseline)
    if baseline not in values:
        raise UserError(f"--ratio {text!r}: {baseline!r} is not a value of {axis}; values: {', '.join(values)}")
    return RatioSpec(axis, baseline)


def _row_ratio(r: pd.Series) -> tuple[float, float, float]:
    return ratio_ci(r[f"{HEADLINE}_base"], r[f"{HEADLINE}_se_base"], r[HEADLINE], r[f"{HEADLINE}_se"],
                    int(min(r["n"], r["n_base"])) - 1)


def matched_ratios(summary: pd.DataFrame, axis: str, baseline: str, loose: tuple[str, ...] = (),
                   carried: tuple[str, ...] = ()) -> pd.DataFrame:
    """Each cell whose `axis` is not `baseline` beside the baseline's cell with every other setting equal (`loose`:
    settings left out of the match as well, e.g. an engine's own settings, which its baseline does not have), and
    the ratio of their headlines with its 95% interval. `_value`: the axis as shown; the baseline's `carried`
    columns (and its headline, standard error, n and flags) end in `_base`."""
    keys = [c for c in summary.columns if c in SETTINGS and c != axis and c not in loose] + ["tool", "phase"]
    measures = list(dict.fromkeys([HEADLINE, f"{HEADLINE}_se", "n", "flags", *carried]))
    data = summary.assign(_value=summary[axis].map(shown_value))
    base = data[data["_value"] == baseline][[*keys, *measures]]
    others = data[data["_value"] != baseline]
    merged = others.merge(base, on=keys, how="inner", suffixes=("", "_base"))
    if merged.empty:
        return merged
    ratios = [_row_ratio(r) for _, r in merged.iterrows()]
    merged["ratio"] = [x[0] for x in ratios]
    merged["ratio_ci95_low"] = [x[1] for x in ratios]
    merged["ratio_ci95_high"] = [x[2] for x in ratios]
    return merged


def ratio_table(summary: pd.DataFrame, spec: RatioSpec) -> pd.DataFrame:
    """One row per (other value, matched cell, phase): ratio to the baseline with its 95% interval."""
    merged = matched_ratios(summary, spec.axis, spec.baseline)
    if merged.empty:
        return pd.DataFrame()
    shown = independent(merged, varying(merged, (spec.axis, "phase", *MEASURED, *DERIVED)))
    merged["cell"] = [describe_cell(r, shown) for r in merged.to_dict("records")]
    merged["label"] = [_label(spec, r) for r in merged.to_dict("records")]
    merged["flags_either"] = ["; ".join(dict.fromkeys(f for side in (a, b) for f in str(side or "").split("; ") if f))
                              for a, b in zip(merged["flags"], merged["flags_base"], strict=True)]
    cols = ["_value", "phase", *shown, "ratio", "ratio_ci95_low", "ratio_ci95_high", HEADLINE, f"{HEADLINE}_base",
            "n", "n_base", "flags", "flags_base", "flags_either", "cell", "label"]
    out = merged[cols].rename(columns={"_value": spec.axis, HEADLINE: f"{HEADLINE}_value"})
    out.insert(1, "baseline", spec.baseline)
    order = out.assign(_phase=out["phase"].map({"write": 0, "read": 1}))
    return order.sort_values([spec.axis, "_phase", "cell"]).drop(columns="_phase").reset_index(drop=True)


def _label(spec: RatioSpec, r: dict) -> str:
    ci = "" if math.isnan(r["ratio_ci95_low"]) else f" [{r['ratio_ci95_low']:.2f}, {r['ratio_ci95_high']:.2f}]"
    return f"{r['_value']} / {spec.baseline} {r['phase']}: {r['ratio']:.2f}×{ci or ' (no CI: one repetition)'}"
