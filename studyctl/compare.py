"""Study B against study A, cell by cell: ratio of mean bandwidth with a 95% CI, regressions flagged.

Cells match on the point configuration minus repetition; the filesystem is left out of the match
when each study used exactly one and they differ (comparing filesystems is then the point).
The ratio's interval uses the delta method on the two means' standard errors (see stats.ratio_ci).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from studyctl.collect import build_tables
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text
from studyctl.stats import ratio_ci

MATCH = ["tool", "model", "zero_stage", "tensor_parallel", "pipeline_parallel", "nodes", "ranks_per_node", "io_mode",
         "scale", "block_bytes", "phase"]


@dataclass
class CompareResult:
    study_a: str
    study_b: str
    threshold: float
    matched: pd.DataFrame
    unmatched_a: int
    unmatched_b: int
    outputs: list[Path] = field(default_factory=list)

    @property
    def regressed(self) -> pd.DataFrame:
        return self.matched[self.matched["regressed"]] if not self.matched.empty else self.matched

    @property
    def any_regressed(self) -> bool:
        return bool(len(self.regressed))

    def summary_lines(self) -> list[str]:
        lines = [f"{self.study_b} vs {self.study_a}: {len(self.matched)} matched cells "
                 f"({self.unmatched_a} only in {self.study_a}, {self.unmatched_b} only in {self.study_b}); "
                 f"regression threshold {self.threshold:.1%}"]
        for r in self.matched.itertuples():
            flag = "REGRESSED" if r.regressed else ("faster" if r.ratio > 1 else "")
            ci = f"[{r.ratio_ci95_low:.3f}, {r.ratio_ci95_high:.3f}]" if not math.isnan(r.ratio_ci95_low) else "[n/a]"
            lines.append(f"  {r.model} ZeRO-{r.zero_stage} {r.nodes}×{r.ranks_per_node} {r.io_mode} {r.phase}: "
                         f"{r.GiBps_a:.3f} → {r.GiBps_b:.3f} GiB/s, ratio {r.ratio:.3f} {ci} {flag}".rstrip())
        lines.append(f"{len(self.regressed)} cell(s) regressed beyond {self.threshold:.1%}")
        lines += [f"output: {p}" for p in self.outputs]
        return lines


def compare(a_root: Path, b_root: Path, threshold: float) -> CompareResult:
    sa, sb = build_tables(a_root).summary, build_tables(b_root).summary
    if sa.empty or sb.empty:
        empty = a_root.name if sa.empty else b_root.name
        raise UserError(f"study {empty} has no completed results to compare (run collect/submit first)", 1)
    keys = [k for k in MATCH if k in sa.columns and k in sb.columns]
    fs_a, fs_b = set(sa["filesystem"]), set(sb["filesystem"])
    if not (len(fs_a) == 1 and len(fs_b) == 1 and fs_a != fs_b):
        keys.append("filesystem")
    cols = [*keys, "n", "aggregate_GiBps_mean", "aggregate_GiBps_stdev"]
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
    matched = matched.rename(columns={"aggregate_GiBps_mean_a": "GiBps_a", "aggregate_GiBps_mean_b": "GiBps_b"})
    matched = matched.sort_values(["model", "phase", "zero_stage", "io_mode", "nodes"]).reset_index(drop=True)
    result = CompareResult(a_root.name, b_root.name, threshold, matched, unmatched_a, unmatched_b)
    out = b_root / "compare" / a_root.name
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "comparison.csv"
    matched.to_csv(csv, index=False)
    result.outputs.append(csv)
    result.outputs.append(_overlay(sa, sb, a_root.name, b_root.name, out / "overlay.png"))
    atomic_write_text(out / "comparison.txt", "\n".join(result.summary_lines()) + "\n")
    result.outputs.append(out / "comparison.txt")
    return result


def _overlay(sa: pd.DataFrame, sb: pd.DataFrame, name_a: str, name_b: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from studyctl.plots import MARKERS, _finish, _nodes_axis

    phases = [p for p in ("write", "read") if p in set(sa["phase"]) | set(sb["phase"])]
    fig, axes = plt.subplots(1, len(phases), figsize=(6.4 * len(phases), 4.4), squeeze=False)
    for ax, phase in zip(axes[0], phases, strict=True):
        for frame, name, colour, style in ((sa, name_a, "#1f77b4", "-"), (sb, name_b, "#d62728", "--")):
            data = frame[frame["phase"] == phase]
            for (model, zero, io_mode), g in data.groupby(["model", "zero_stage", "io_mode"]):
                g = g.groupby("nodes", as_index=False)[["aggregate_GiBps_mean", "aggregate_GiBps_ci95"]].mean()
                ax.errorbar(g["nodes"], g["aggregate_GiBps_mean"], yerr=g["aggregate_GiBps_ci95"].fillna(0),
                            color=colour, linestyle=style, marker=MARKERS.get(int(zero), "x"), capsize=3,
                            label=f"{name}: {model} ZeRO-{zero} {io_mode}")
        _nodes_axis(ax, pd.concat([sa["nodes"], sb["nodes"]]))
        ax.set_ylabel("aggregate bandwidth (GiB/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{name_b} vs {name_a}: {phase}")
    return _finish(fig, axes[0], path)
