"""Study B against study A, cell by cell: ratio of mean bandwidth with a 95% CI, regressions flagged.

Matching: cells match on the point configuration minus repetition, per phase (tool, model, ZeRO, TP,
PP, nodes, ranks per node, I/O mode, ...). A configuration column is left out of the match when each
study has exactly one value of it and the values differ: that difference is what is being compared
(e.g. filesystem lustre vs weka, or a scale/restore mode change between versions).

Ratio: B/A of the mean aggregate GiB/s over repetitions. Its 95% interval is the delta method on the
two means' standard errors, r · (1 ± t · sqrt((se_a/a)² + (se_b/b)²)), with df = min(n_a, n_b) − 1
(conservative next to Welch's); NaN when a side has one repetition.

A cell regressed when the ratio is below 1 − threshold; `significant` says the whole interval is below 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from studyctl.analysis.stats import ratio_ci
from studyctl.analysis.tables import CELL_COLUMNS, build_tables
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text

DERIVED = ("world_size",)  # follows from nodes × ranks per node


@dataclass
class CompareResult:
    study_a: str
    study_b: str
    threshold: float
    matched: pd.DataFrame  # one row per matched cell × phase: GiBps_a, GiBps_b, ratio, CI, regressed
    unmatched_a: int
    unmatched_b: int
    match_keys: list[str] = field(default_factory=list)
    differing: dict[str, tuple[str, str]] = field(default_factory=dict)  # column → (A's value, B's value)
    outputs: list[Path] = field(default_factory=list)

    @property
    def regressed(self) -> pd.DataFrame:
        return self.matched[self.matched["regressed"]] if not self.matched.empty else self.matched

    @property
    def any_regressed(self) -> bool:
        """True → the CLI exits 1."""
        return bool(len(self.regressed))

    def summary_lines(self) -> list[str]:
        lines = [f"{self.study_b} vs {self.study_a}: {len(self.matched)} matched cells "
                 f"({self.unmatched_a} only in {self.study_a}, {self.unmatched_b} only in {self.study_b}); "
                 f"regression threshold {self.threshold:.1%}"]
        lines += [f"  compared across {col}: {a} → {b}" for col, (a, b) in self.differing.items()]
        for r in self.matched.itertuples():
            flag = "REGRESSED" if r.regressed else ("faster" if r.ratio > 1 else "")
            if r.regressed and r.significant:
                flag += " (CI below 1)"
            ci = f"[{r.ratio_ci95_low:.3f}, {r.ratio_ci95_high:.3f}]" if not math.isnan(r.ratio_ci95_low) \
                else "[n/a: one repetition]"
            cell = f"{r.model} ZeRO-{r.zero_stage} {r.nodes}×{r.ranks_per_node} {r.io_mode} {r.phase}"
            lines.append(f"  {cell}: {r.GiBps_a:.3f} → {r.GiBps_b:.3f} GiB/s, ratio {r.ratio:.3f} {ci} "
                         f"{flag}".rstrip())
        lines.append(f"{len(self.regressed)} cell(s) regressed beyond {self.threshold:.1%}")
        lines += [f"output: {p}" for p in self.outputs]
        return lines


def match_columns(sa: pd.DataFrame, sb: pd.DataFrame) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """Keys to join cells on, and the columns left out because the studies differ in them as a whole."""
    keys, differing = [], {}
    for col in CELL_COLUMNS:
        if col in DERIVED or col not in sa.columns or col not in sb.columns:
            continue
        va, vb = set(sa[col].dropna()), set(sb[col].dropna())
        if len(va) == 1 and len(vb) == 1 and va != vb:
            differing[col] = (str(next(iter(va))), str(next(iter(vb))))
        else:
            keys.append(col)
    return [*keys, "phase"], differing


def compare_summaries(sa: pd.DataFrame, sb: pd.DataFrame, threshold: float) -> tuple[pd.DataFrame, int, int,
                                                                                       list[str], dict]:
    """The pure part: matched rows with ratio, CI and flags (no files touched)."""
    keys, differing = match_columns(sa, sb)
    cols = [*keys, "n", "aggregate_GiBps_mean", "aggregate_GiBps_stdev", "aggregate_GiBps_ci95"]
    merged = sa[cols].merge(sb[cols], on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    matched = merged[merged["_merge"] == "both"].drop(columns="_merge").copy()
    unmatched_a = int((merged["_merge"] == "left_only").sum())
    unmatched_b = int((merged["_merge"] == "right_only").sum())
    ratios = []
    for r in matched.itertuples():
        se_a = r.aggregate_GiBps_stdev_a / math.sqrt(r.n_a) if r.n_a > 1 else math.nan
        se_b = r.aggregate_GiBps_stdev_b / math.sqrt(r.n_b) if r.n_b > 1 else math.nan
        ratios.append(ratio_ci(r.aggregate_GiBps_mean_a, se_a, r.aggregate_GiBps_mean_b, se_b,
                               int(min(r.n_a, r.n_b)) - 1))
    matched["ratio"] = [x[0] for x in ratios]
    matched["ratio_ci95_low"] = [x[1] for x in ratios]
    matched["ratio_ci95_high"] = [x[2] for x in ratios]
    matched["regressed"] = matched["ratio"] < 1 - threshold
    matched["significant"] = matched["ratio_ci95_high"] < 1
    matched = matched.rename(columns={"aggregate_GiBps_mean_a": "GiBps_a",
                                      "aggregate_GiBps_mean_b": "GiBps_b",
                                      "aggregate_GiBps_ci95_a": "ci95_a",
                                      "aggregate_GiBps_ci95_b": "ci95_b"})
    if not matched.empty:
        order = ["model", "phase", "zero_stage", "io_mode", "nodes"]
        matched = matched.sort_values(order).reset_index(drop=True)
    return matched, unmatched_a, unmatched_b, keys, differing


def compare(a: Path, b: Path, threshold: float = 0.05) -> CompareResult:
    """Two study directories, cell by cell; writes comparison.csv/.txt and overlay.png in b/compare/<a>/."""
    a, b = Path(a), Path(b)
    sa, sb = build_tables(a).summary, build_tables(b).summary
    if sa.empty or sb.empty:
        empty = a.name if sa.empty else b.name
        raise UserError(f"study {empty} has no completed results to compare (run the study first)", 1)
    matched, un_a, un_b, keys, differing = compare_summaries(sa, sb, threshold)
    result = CompareResult(a.name, b.name, threshold, matched, un_a, un_b, keys, differing)
    out = b / "compare" / a.name
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "comparison.csv"
    atomic_write_text(csv, matched.to_csv(index=False))
    result.outputs.append(csv)
    if not matched.empty:
        from studyctl.analysis.plots import compare_overlay

        result.outputs.append(compare_overlay(matched, a.name, b.name, threshold, out / "overlay.png"))
    text = out / "comparison.txt"
    result.outputs.append(text)
    atomic_write_text(text, "\n".join(result.summary_lines()) + "\n")
    return result
