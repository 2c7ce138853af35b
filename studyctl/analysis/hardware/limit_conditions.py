"""How a named-limit rule is evaluated: a `Rule` holds where every `Condition` does, and each condition's test
decides one cell's facts three ways. A test on a measured figure decides on its 95% interval: it holds where the
whole interval is on its side, fails where none of it is, and otherwise the CIs do not tell (None), its `straddle`
saying which interval and what would settle it. The declarations (which rules, in what order, with what printed
text) are `limit_rules`; the thresholds `limit_bounds`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from studyctl.analysis.hardware import limit_bounds as bound
from studyctl.analysis.hardware.limit_facts import (
    NAN,
    CellFacts,
    Tri,
    at_least,
    has_ci,
    known,
    pct_ci,
    rate_ci,
    share,
)


def _no_ci(c: CellFacts) -> str:
    return "no CI"


@dataclass(frozen=True)
class Condition:
    """One clause of a rule: its printed text and the test it stands for (None: the CIs do not tell, and
    `straddle` says what)."""

    text: str
    test: Callable[[CellFacts], Tri]
    straddle: Callable[[CellFacts], str] = _no_ci


@dataclass(frozen=True)
class Rule:
    name: str
    limit: str
    conditions: tuple[Condition, ...]  # every one must hold
    evidence: Callable[[CellFacts], str]

    @property
    def text(self) -> str:
        """As printed: the limit, then every condition."""
        return f"{self.limit}: {'; and '.join(c.text for c in self.conditions)}"

    def decide(self, c: CellFacts) -> tuple[Tri, list[str]]:
        """(True: holds; False: does not; None: could, the CIs do not tell), and what straddles."""
        results = [(cond, cond.test(c)) for cond in self.conditions]
        if any(r is False for _, r in results):
            return False, []
        open_ = [cond.straddle(c) for cond, r in results if r is None]
        return (None, open_) if open_ else (True, [])


def more_checkpoints(c: CellFacts) -> str:
    """What narrows a per-rank figure's interval: more checkpoints (repetitions, or writes / reads per run)."""
    got = f"{c.rank_checkpoints} checkpoint{'s' if c.rank_checkpoints != 1 else ''}"
    return f"over {got}: more checkpoints (repetitions, or writes / reads per run) would settle it"


# --- page cache -------------------------------------------------------------------------------------------------------

def unsynced(c: CellFacts) -> Tri:
    return c.phase == "write" and c.io_mode_used == "buffered" and not c.fsync


def resident(c: CellFacts) -> Tri:
    return c.phase == "read" and c.sampled and c.resident_pages_before > 0


def warm(c: CellFacts) -> Tri:
    return c.phase == "read" and c.cold_read_method == "none" and not c.sampled


def unsampled_cached_read(c: CellFacts) -> Tri:
    return c.phase == "read" and c.cold_read_method != "direct" and not c.sampled  # O_DIRECT bypasses the cache


def cell_and_probe(c: CellFacts) -> str:
    return f"the cell {rate_ci(c.GiBps, c.GiBps_low, c.GiBps_high)}, the probe " \
           f"{rate_ci(c.ceiling_GiBps or NAN, c.ceiling_low, c.ceiling_high)}"


def overlap(c: CellFacts) -> str:
    return f"the intervals overlap ({cell_and_probe(c)}), the share's reaching above 100%"


# --- storage ----------------------------------------------------------------------------------------------------------

def at_ceiling(c: CellFacts) -> Tri:
    return at_least(c.share_low, c.share_high, bound.STORAGE_BOUND) if known(c.ceiling_GiBps) else False


def share_straddles(bound: float) -> Callable[[CellFacts], str]:
    def say(c: CellFacts) -> str:
        return f"its share of the ceiling {pct_ci(c.share, c.share_low, c.share_high)} straddles {bound:.0%}"
    return say


# --- imbalance --------------------------------------------------------------------------------------------------------

def heavy(c: CellFacts) -> Tri:
    """The layout's bytes are exact (every checkpoint alike): no interval."""
    return c.bytes_max_over_mean >= bound.IMBALANCE_RATIO


def follows_bound(c: CellFacts) -> float:
    """The heaviest rank's time over the movers' mean at which it follows its bytes: 1 + IMBALANCE_TIME_FOLLOWS of
    its bytes' excess over theirs."""
    return 1 + bound.IMBALANCE_TIME_FOLLOWS * (c.heaviest_bytes_over_movers - 1)


def time_follows(c: CellFacts) -> Tri:
    """Where per-rank times are recorded: the time ratio's 95% interval (over the cell's checkpoints) at or above
    `follows_bound` (True), wholly below it (False), else the CIs do not tell; not recorded: not a reason against."""
    if math.isnan(c.heaviest_time_over_mean):
        return True
    return at_least(c.heaviest_time_low, c.heaviest_time_high, follows_bound(c))


def time_text(c: CellFacts) -> str:
    """"1.42× the mean time [1.21, 1.66]" (its interval over the cell's checkpoints), or "… (no CI)"."""
    ci = f"[{c.heaviest_time_low:.2f}, {c.heaviest_time_high:.2f}]" if has_ci(c.heaviest_time_low,
                                                                             c.heaviest_time_high) else "(no CI)"
    return f"{c.heaviest_time_over_mean:.2f}× the mean time {ci}"


def time_straddles(c: CellFacts) -> str:
    return (f"the heaviest rank's time {time_text(c)} straddles {follows_bound(c):.2f}× (its bytes "
            f"{c.heaviest_bytes_over_movers:.2f}× theirs) {more_checkpoints(c)}")


def closing_bound(c: CellFacts) -> float:
    """The share s of the even ceiling from which even ranks (s × max/mean bytes) close IMBALANCE_CLOSES of the gap
    (1 − s): s·(r − 1) ≥ IMBALANCE_CLOSES·(1 − s)."""
    return bound.IMBALANCE_CLOSES / (c.bytes_max_over_mean - 1 + bound.IMBALANCE_CLOSES)


def closes(c: CellFacts) -> Tri:
    if not known(c.even_ceiling_GiBps) or not heavy(c):
        return False
    bound = closing_bound(c)
    low, high = c.even_share_low, c.even_share_high
    if math.isnan(low) or math.isnan(high):
        return None
    if low >= bound and high < 1:
        return True
    return False if high < bound or low >= 1 else None


def closes_straddle(c: CellFacts) -> str:
    return (f"its share of the even ceiling {pct_ci(c.even_share, c.even_share_low, c.even_share_high)} straddles "
            f"{closing_bound(c):.0%} (where even ranks would close {bound.IMBALANCE_CLOSES:.0%} of the gap) or 100%")


# --- metadata and per-file cost --------------------------------------------------------------------------------------

def per_file_fsync(c: CellFacts) -> bool:
    """An fsync that costs per file, not per byte: direct (the data is already on the device), or small files."""
    return c.phase == "write" and (c.io_mode_used == "direct" or c.bytes_per_file <= bound.SMALL_FILE_BYTES)


def calls(c: CellFacts) -> list[float]:
    return [c.slowest_open_share, c.slowest_close_share] + ([c.slowest_fsync_share] if per_file_fsync(c) else [])


def calls_ci(c: CellFacts) -> tuple[float, float]:
    """The 95% interval of the per-file calls' share `calls` sums."""
    return (c.calls_fsync_share_low, c.calls_fsync_share_high) if per_file_fsync(c) else \
        (c.calls_share_low, c.calls_share_high)


def metadata(c: CellFacts) -> Tri:
    """The per-file calls' share over its 95% interval (the cell's checkpoints) at or above METADATA_SHARE; no time
    split recorded: False."""
    if any(math.isnan(p) for p in calls(c)):
        return False
    return at_least(*calls_ci(c), bound.METADATA_SHARE)


def calls_text(c: CellFacts) -> str:
    """"38% [31%, 45%]": the per-file calls' share with its interval."""
    return pct_ci(sum(calls(c)), *calls_ci(c))


def metadata_straddles(c: CellFacts) -> str:
    return (f"the slowest rank's share of time in per-file calls {calls_text(c)} straddles {bound.METADATA_SHARE:.0%} "
            f"{more_checkpoints(c)}")


def small_files(c: CellFacts) -> Tri:
    return known(c.bytes_per_file) and c.bytes_per_file <= bound.SMALL_FILE_BYTES and known(c.slowest_files)


def gap_unexplained(c: CellFacts) -> Tri:
    """The share's interval wholly at or below 1 − METADATA_SHARE: a quarter of the time or more is not the bytes
    streaming at the ceiling."""
    if not known(c.ceiling_GiBps):
        return False
    above = at_least(c.share_low, c.share_high, 1 - bound.METADATA_SHARE + 1e-12)
    return None if above is None else not above


# --- network and memory -----------------------------------------------------------------------------------------------

def network(c: CellFacts) -> Tri:
    return (c.phase == "read" and c.restore == "broadcast" and share(c.broadcast_GiBps, c.bcast_ceiling_GiBps)
            >= bound.NETWORK_BOUND and c.broadcast_time_share >= bound.NETWORK_TIME_SHARE)


def memory(c: CellFacts) -> Tri:
    return (c.phase == "write" and c.strategy == "async"
            and share(c.snapshot_GiBps_per_rank, c.memcpy_ceiling_GiBps_per_rank) >= bound.MEMORY_BOUND)
