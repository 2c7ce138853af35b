"""What held a cell back: one named limit with its evidence, as a sentence a user can check.

The rules are declared objects (`limit_rules.RULES`, one order of precedence): the first rule that holds names the
limit, unless an earlier rule could hold too (a condition whose 95% intervals straddle its bound, or that has
none): then the verdict says the CIs do not allow one, and what would tell. When no rule holds or could, the
verdict says that nothing measured explains the gap, with the figures checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from studyctl.analysis.hardware.limit_bounds import (
    FRAMEWORK_SHARE,
    IMBALANCE_CLOSES,
    IMBALANCE_RATIO,
    MEMORY_BOUND,
    METADATA_SHARE,
    NETWORK_BOUND,
    SMALL_FILE_BYTES,
    STORAGE_BOUND,
)
from studyctl.analysis.hardware.limit_conditions import Rule, time_text
from studyctl.analysis.hardware.limit_evidence import framework_ci, probe_short
from studyctl.analysis.hardware.limit_facts import CellFacts, beyond_both, known, no_ci, pct_ci, what_would_tell
from studyctl.analysis.hardware.limit_rules import RULES, rules_text
from studyctl.units import format_bytes

__all__ = ["FRAMEWORK_SHARE", "IMBALANCE_CLOSES", "IMBALANCE_RATIO", "MEMORY_BOUND", "METADATA_SHARE",
           "NETWORK_BOUND", "RULES", "SMALL_FILE_BYTES", "STORAGE_BOUND", "UNDECIDED", "CellFacts", "Verdict",
           "name_limit", "rules_text"]

UNDECIDED = "undecided"  # the limit column where the CIs do not allow a verdict


@dataclass(frozen=True)
class Verdict:
    limit: str  # a Rule's limit | none | unknown | undecided
    evidence: str

    @property
    def sentence(self) -> str:
        return f"{self.limit}: {self.evidence}"


def _nothing(c: CellFacts) -> Verdict:
    engine = [f"engine {c.engine}: {_framework_checked(c)}"] if c.engine != "stream" else []
    if not known(c.ceiling_GiBps):
        return Verdict("unknown", "; ".join([c.ceiling_note or "no ceiling measured for this shape", *engine]))
    said = [f"{pct_ci(c.share, c.share_low, c.share_high)} of this shape's streaming ceiling"]
    if not math.isnan(c.bytes_max_over_mean):
        time = "" if math.isnan(c.heaviest_time_over_mean) else f" and {time_text(c)}"
        said.append(f"the heaviest rank at {c.bytes_max_over_mean:.2f}× the mean bytes{time}")
    per_file = [c.slowest_open_share, c.slowest_close_share]
    said.append("no per-rank time split recorded" if any(math.isnan(p) for p in per_file) else
                f"{pct_ci(sum(per_file), c.calls_share_low, c.calls_share_high)} of the slowest rank's time in "
                "opening and closing files")
    if known(c.bytes_per_file):
        said.append(f"files of {format_bytes(c.bytes_per_file, 1)} on average")
    return Verdict("none", "nothing measured explains the gap: " + "; ".join([*said, *engine]))


def _framework_checked(c: CellFacts) -> str:
    """What the framework rule found where it did not speak: the share and its CI, or why there is none."""
    if math.isnan(c.framework_share):
        return c.framework_note or "the framework's share not known"
    basis = c.framework_basis or "basis not recorded"
    return f"the framework's share {c.framework_share:.0%}{framework_ci(c)} ({basis})"


def _undecided(c: CellFacts, open_: list[tuple[Rule, list[str]]], held: Rule | None) -> Verdict:
    """Rules that could hold before (or instead of) `held`: with no CI at all, say that; else what straddles."""
    names = " or ".join(dict.fromkeys(rule.limit for rule, _ in open_))
    missing_ci = no_ci(c)
    if missing_ci:
        head = f"{missing_ci}: no verdict that needs one ({names} could hold)"
    else:
        reasons: dict[str, list[str]] = {}
        for rule, why in open_:
            for w in why:
                reasons.setdefault(w, []).append(rule.limit)
        could = "; ".join(f"{' or '.join(dict.fromkeys(limits))}: {w}" for w, limits in reasons.items())
        head = f"the 95% CIs do not allow a verdict: {could}"
    then = f"; else {held.limit} ({held.evidence(c)})" if held else ""
    return Verdict(UNDECIDED, f"{head}{then}; what would tell: {what_would_tell(c)}")


def name_limit(c: CellFacts) -> Verdict:
    """The limit (`choose`), and where the cell lies above its ceiling beyond both CIs and that is not the page
    cache, that the probe fell short."""
    verdict = choose(c)
    if verdict.limit != "page cache" and beyond_both(c):
        return Verdict(verdict.limit, f"{verdict.evidence}; {probe_short(c)}")
    return verdict


def choose(c: CellFacts) -> Verdict:
    """The first rule in RULES that holds, unless an earlier one could (the CIs do not tell); else what was checked
    and found not to explain the gap."""
    open_: list[tuple[Rule, list[str]]] = []
    for rule in RULES:
        holds, why = rule.decide(c)
        if holds is None:
            open_.append((rule, why))
        elif holds:
            return _undecided(c, open_, rule) if open_ else Verdict(rule.limit, rule.evidence(c))
    return _undecided(c, open_, None) if open_ else _nothing(c)
