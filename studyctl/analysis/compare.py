"""Study B against study A, cell by cell: ratio of the headline bandwidth with a 95% CI, regressions flagged.

Matching: cells match on every setting the two studies share, per phase. A setting with one value in
each study and different values (io_mode, model, nodes, filesystem, anything) is what is being
compared: it is left out of the match and becomes the comparison's label ("io_mode buffered → direct").

Ratio: B/A of total bytes / total time. Its 95% interval comes from the two estimates' standard errors
on the log scale, r · exp(± t · sqrt((se_a/a)² + (se_b/b)²)), df = min(n_a, n_b) − 1 (`stats.ratio_ci`);
NaN when a side has one repetition. A verdict needs that interval: a cell is `judged` only with a CI
(two or more repetitions on both sides); a judged cell regressed when the ratio is below 1 − threshold, and
`significant` says the whole interval is below 1. An unjudged cell shows its ratio and "not enough
repetitions to judge", and never makes the command fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from studyctl.analysis.cells import IDENTITY, MEASURED, independent, varying
from studyctl.analysis.hardware.limit_facts import pct_ci
from studyctl.analysis.labels import describe_cell
from studyctl.analysis.stats import ratio_ci
from studyctl.analysis.tables import HEADLINE, build_tables
from studyctl.analysis.values import missing
from studyctl.attempt.paths import StudyPaths
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_text, owned_dir

# how close to its own hardware each study came: its ceiling and its share, each with its 95% interval (`hardware`)
HARDWARE = ["ceiling_GiBps", "ceiling_GiBps_low", "ceiling_GiBps_high", "ceiling_share", "ceiling_share_low",
            "ceiling_share_high", "limit"]
MEASURES = ["n", HEADLINE, f"{HEADLINE}_se", f"{HEADLINE}_ci95", "flags", *HARDWARE]


@dataclass
class CompareResult:
    study_a: str
    study_b: str
    threshold: float
    matched: pd.DataFrame  # one row per matched cell × phase: GiBps_a, GiBps_b, ratio, CI, regressed, label
    unmatched_a: int
    unmatched_b: int
    match_keys: list[str] = field(default_factory=list)
    differing: dict[str, tuple[str, str]] = field(default_factory=dict)  # setting → (A's value, B's value)
    outputs: list[Path] = field(default_factory=list)

    @property
    def regressed(self) -> pd.DataFrame:
        return self.matched[self.matched["regressed"]] if not self.matched.empty else self.matched

    @property
    def any_regressed(self) -> bool:
        """True → the CLI exits 1."""
        return bool(len(self.regressed))

    @property
    def unjudged(self) -> int:
        """Cells with no CI (one repetition on a side): shown, never a verdict."""
        return int((~self.matched["judged"]).sum()) if not self.matched.empty else 0

    @property
    def label(self) -> str:
        return "; ".join(f"{col} {a} → {b}" for col, (a, b) in self.differing.items()) or "same settings"

    def summary_lines(self) -> list[str]:
        lines = [f"{self.study_b} vs {self.study_a} ({self.label}): {len(self.matched)} matched cells "
                 f"({self.unmatched_a} only in {self.study_a}, {self.unmatched_b} only in {self.study_b}); "
                 f"regression threshold {self.threshold:.1%}"]
        for r in self.matched.itertuples():
            lines.append(f"  {r.label} {r.phase}: {r.GiBps_a:.3f} → {r.GiBps_b:.3f} GiB/s, ratio {r.ratio:.3f} "
                         f"{_verdict(r)}{_hardware(r)}")
        lines.append(f"{len(self.regressed)} cell(s) regressed beyond {self.threshold:.1%}"
                     + (f"; {self.unjudged} not judged (one repetition on a side: no CI)" if self.unjudged else ""))
        lines += [f"output: {p}" for p in self.outputs]
        return lines


def _verdict(r: Any) -> str:
    """The CI and what it lets us say about one matched cell."""
    if not r.judged:
        return "[n/a: one repetition on a side, no CI] not enough repetitions to judge"
    flag = "REGRESSED" if r.regressed else ("faster" if r.ratio > 1 else "")
    if r.regressed and r.significant:
        flag += " (CI below 1)"
    return f"[{r.ratio_ci95_low:.3f}, {r.ratio_ci95_high:.3f}] {flag}".rstrip()


def _hardware(r: Any) -> str:
    """"; of the hardware 62% [50%, 75%] → 90% [80%, 101%] (limit imbalance → storage)": each study's share of its
    own shape's ceiling with its 95% interval, so a move across machines reads as a move toward (or away from) the
    hardware; empty where neither has one."""
    a, b = r.ceiling_share_a, r.ceiling_share_b
    if missing(a) and missing(b):
        return ""
    shares = " → ".join("–" if missing(x) else pct_ci(float(x), _f(low), _f(high)) for x, low, high in (
        (a, r.ceiling_share_low_a, r.ceiling_share_high_a), (b, r.ceiling_share_low_b, r.ceiling_share_high_b)))
    limits = f"limit {r.limit_a}" if r.limit_a == r.limit_b else f"limit {r.limit_a} → {r.limit_b}"
    return f"; of the hardware {shares} ({limits})"


def _f(x: Any) -> float:
    return float("nan") if missing(x) else float(x)


def _values(frame: pd.DataFrame, col: str) -> set[str]:
    return {str(v) for v in frame[col].tolist()}


def match_columns(sa: pd.DataFrame, sb: pd.DataFrame) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """Keys to join cells on, and the settings left out because the studies differ in them as a whole."""
    keys, differing = [], {}
    for col in IDENTITY:
        if col not in sa.columns or col not in sb.columns:
            continue
        va, vb = _values(sa, col), _values(sb, col)
        if len(va) == 1 and len(vb) == 1 and va != vb:
            differing[col] = (next(iter(va)), next(iter(vb)))
        else:
            keys.append(col)
    # what ran follows what was asked: a measured column differing with its setting says nothing new
    for col, setting in (("io_mode_used", "io_mode"), ("cold_read_method", "io_mode")):
        if col in differing and setting in differing:
            del differing[col]
    return [*keys, "phase"], differing


def nothing_comparable(sa: pd.DataFrame, sb: pd.DataFrame, keys: list[str]) -> str:
    """Why no cell matched: the shared settings whose values do not overlap."""
    disjoint = [f"{c} ({', '.join(sorted(_values(sa, c)))} vs {', '.join(sorted(_values(sb, c)))})"
                for c in keys if c in sa and c in sb and not (_values(sa, c) & _values(sb, c))]
    return "no cell of one study matches a cell of the other" + (
        f": no shared values of {'; '.join(disjoint)}" if disjoint else "")


def compare_summaries(sa: pd.DataFrame, sb: pd.DataFrame, threshold: float
                      ) -> tuple[pd.DataFrame, int, int, list[str], dict[str, tuple[str, str]]]:
    """The pure part: matched rows with ratio, CI, flags and a label per cell (no files touched)."""
    keys, differing = match_columns(sa, sb)
    sa, sb = (s.assign(**{m: None for m in HARDWARE if m not in s}) for s in (sa, sb))  # studies from before
    # match on the values as text (an int in one study's table is a float in the other's); keep A's values
    text = [f"_key_{k}" for k in keys]
    left = sa[[*keys, *MEASURES]].assign(**{t: sa[k].astype(str) for t, k in zip(text, keys, strict=True)})
    right = sb[MEASURES].assign(**{t: sb[k].astype(str) for t, k in zip(text, keys, strict=True)})
    merged = left.merge(right, on=text, how="outer", suffixes=("_a", "_b"), indicator=True)
    matched = merged[merged["_merge"] == "both"].drop(columns=["_merge", *text]).reset_index(drop=True)
    unmatched_a = int((merged["_merge"] == "left_only").sum())
    unmatched_b = int((merged["_merge"] == "right_only").sum())
    ratios = [ratio_ci(r[f"{HEADLINE}_a"], r[f"{HEADLINE}_se_a"], r[f"{HEADLINE}_b"], r[f"{HEADLINE}_se_b"],
                       int(min(r["n_a"], r["n_b"])) - 1) for _, r in matched.iterrows()]
    matched["ratio"] = [x[0] for x in ratios]
    matched["ratio_ci95_low"] = [x[1] for x in ratios]
    matched["ratio_ci95_high"] = [x[2] for x in ratios]
    matched["judged"] = matched["ratio_ci95_low"].notna() & matched["ratio_ci95_high"].notna()
    matched["regressed"] = matched["judged"] & (matched["ratio"] < 1 - threshold)
    matched["significant"] = matched["judged"] & (matched["ratio_ci95_high"] < 1)
    matched = matched.rename(columns={f"{HEADLINE}_a": "GiBps_a", f"{HEADLINE}_b": "GiBps_b",
                                      f"{HEADLINE}_ci95_a": "ci95_a", f"{HEADLINE}_ci95_b": "ci95_b"})
    shown = independent(matched, varying(matched, ("phase", *MEASURED))) if not matched.empty else []
    matched["label"] = [describe_cell(r, shown) for r in matched.to_dict("records")]
    if not matched.empty:
        matched = matched.sort_values(["label", "phase"], key=lambda s: s.map({"write": "0", "read": "1"})
                                      .fillna(s) if s.name == "phase" else s).reset_index(drop=True)
    return matched, unmatched_a, unmatched_b, keys, differing


def compare(a: Path, b: Path, threshold: float = 0.05) -> CompareResult:
    """Two study directories, cell by cell; writes comparison.csv/.txt and ratio.png in b/compare/<a>/.

    UserError (exit 2) when a study has no results or no cell of one matches a cell of the other.
    """
    a, b = Path(a), Path(b)
    out = owned_dir(b, StudyPaths(b).compared_with(a.name), create=False)  # refused before any work
    sa, sb = build_tables(a).summary, build_tables(b).summary
    if sa.empty or sb.empty:
        empty = a.name if sa.empty else b.name
        raise UserError(f"study {empty} has no completed results to compare (run the study first)")
    matched, un_a, un_b, keys, differing = compare_summaries(sa, sb, threshold)
    if matched.empty:
        raise UserError(f"compare {a.name} {b.name}: {nothing_comparable(sa, sb, keys)}")
    result = CompareResult(a.name, b.name, threshold, matched, un_a, un_b, keys, differing)
    owned_dir(b, out)  # a real directory inside B, never a symlink
    csv = out / "comparison.csv"
    atomic_write_text(csv, matched.to_csv(index=False))
    from studyctl.analysis.plots.forest import forest

    rows = matched.assign(highlight=matched["regressed"],
                          label=matched["label"].where(matched["judged"], matched["label"] + " (no CI: not judged)"))
    png = forest(rows, f"{b.name} / {a.name} ({result.label})", "ratio B / A of total bytes / total time",
                 out / "ratio.png", threshold)
    text = out / "comparison.txt"
    result.outputs += [csv, png, text]
    atomic_write_text(text, "\n".join(result.summary_lines()) + "\n")
    return result
