"""The named-limit rules as declared objects: each `Rule` names a limit, lists its conditions (each a printed
clause and the test it stands for) and says its evidence. A condition on a measured figure decides on its 95%
interval: it holds where the whole interval is on its side, fails where none of it is, and otherwise the CIs do
not tell (None). `RULES` is the one order of precedence (`hardware.limits.name_limit` applies it); the printed rules
(report, README) are `rules_text()`, made from these objects, so every condition is stated. Thresholds are named
constants, each with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from studyctl.analysis.hardware.limit_facts import (
    NAN,
    CellFacts,
    Tri,
    at_least,
    beyond_both,
    known,
    pct_ci,
    rate_ci,
    share,
)
from studyctl.units import GIB, format_bytes

# At or above this share of its shape's ceiling (over the share's whole 95% interval) a cell is at the hardware:
# single runs on a shared disk swing 20% and medians of three ~15%, so a smaller gap is not
# evidence of anything else.
STORAGE_BOUND = 0.85
# The heaviest rank this much above the mean bytes: more than the few percent of rounding in even layouts.
IMBALANCE_RATIO = 1.15
# Evening the bytes must close at least this share of the gap to the even ceiling for imbalance to be named: then
# it is the largest single cause, larger than every other one together.
IMBALANCE_CLOSES = 0.5
# At least this share of the heaviest rank's extra bytes (over the ranks that moved bytes) must show as extra time:
# its time follows its bytes (ranks bound one by one). On one shared device the heavy rank finishes alone at nearly
# the device's rate, its extra bytes cost little extra time, and evening them would gain little.
IMBALANCE_TIME_FOLLOWS = 0.5
# A quarter of the slowest rank's time in per-file calls is more than the data phase's noise (~15%).
METADATA_SHARE = 0.25
# Below this mean file size an fsync costs about a journal commit (milliseconds), the time the disk streams a few
# MiB in, so a buffered fsync counts as per-file cost; above it, its time is the data's flush. Files this small
# also cost a request's latency each when read: a quarter of the time beyond their bytes at the ceiling is theirs.
SMALL_FILE_BYTES = 8 << 20
# A broadcast restore is network-bound when broadcasting takes this share of its time at this share of MPI's
# measured broadcast bandwidth.
NETWORK_TIME_SHARE = 0.3
NETWORK_BOUND = 0.7
# An async snapshot at this share of the measured per-rank memory copy rate is bound by host memory.
MEMORY_BOUND = 0.7
# An engine's own work (serialization, copies, planning) taking a quarter of its time is more than the data phase's
# noise (~15%, as for METADATA_SHARE); where the share has a 95% CI, its low end must be above 0 as well.
FRAMEWORK_SHARE = 0.25


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


# --- page cache: bytes that never reached the device, or came from memory -----------------------------------------

def _unsynced(c: CellFacts) -> Tri:
    return c.phase == "write" and c.io_mode_used == "buffered" and not c.fsync


def _resident(c: CellFacts) -> Tri:
    return c.phase == "read" and c.sampled and c.resident_pages_before > 0


def _resident_evidence(c: CellFacts) -> str:
    return (f"{c.resident_pages_before:,.0f} of {c.pages_sampled:,.0f} sampled pages "
            f"({c.resident_pages_before / c.pages_sampled:.1%}) of its files were in the page cache right before "
            "the read: served (in part) from memory, not storage")


def _warm(c: CellFacts) -> Tri:
    return c.phase == "read" and c.cold_read_method == "none" and not c.sampled


def _method(c: CellFacts) -> str:
    return {"direct": "O_DIRECT", "fadvise": "buffered (fadvise-evicted)"}.get(c.ceiling_method or "",
                                                                             c.ceiling_method or "?")


def _unsampled_cached_read(c: CellFacts) -> Tri:
    return c.phase == "read" and c.cold_read_method != "direct" and not c.sampled  # O_DIRECT bypasses the cache


def _both(c: CellFacts) -> str:
    return f"the cell {rate_ci(c.GiBps, c.GiBps_low, c.GiBps_high)}, the probe " \
           f"{rate_ci(c.ceiling_GiBps or NAN, c.ceiling_low, c.ceiling_high)}"


def _above_cold_evidence(c: CellFacts) -> str:
    return (f"restore at {c.share:.2f}× this shape's cold {_method(c)} read probe, beyond both CIs ({_both(c)}), "
            "and no residency sample: served from memory, not storage")


def _overlap(c: CellFacts) -> str:
    return f"the intervals overlap ({_both(c)}), the share's reaching above 100%"


BEYOND = Condition("its figure's 95% interval lies above the same-method probe's (beyond both CIs)", beyond_both,
                   _overlap)


# --- the probe fell short -------------------------------------------------------------------------------------------

def probe_short(c: CellFacts) -> str:
    """What differs between the probe and the checkpoint, stated, not explained: files, sizes, method."""
    verb = "writes and fsyncs" if c.phase == "write" else "reads back"
    probe = (f"the probe {verb} one file of {format_bytes(c.probe_bytes_per_rank, 1)} per rank"
             if known(c.probe_bytes_per_rank) else f"the probe {verb} one file per rank (the largest shard)")
    if c.world_size:
        probe += f" ({c.world_size} files)"
    files = (f"the checkpoint {c.files:,.0f} files of {format_bytes(c.bytes_per_file, 1)} on average"
             if known(c.files) and known(c.bytes_per_file) else "the checkpoint its own files")
    how = f"; both {_method(c)}" if c.phase == "read" else f"; both {c.io_mode_used}"
    return (f"the probe did not reach this shape's ceiling: the cell at {c.share:.2f}× its figure, beyond both CIs "
            f"({_both(c)}); {probe}, {files}{how}: the checkpoint's pattern streams faster here than the probe's")


# --- framework --------------------------------------------------------------------------------------------------------

def _framework_work(c: CellFacts) -> str:
    """"torch.save's serialization and device-to-host copy": what the engine does besides moving the bytes."""
    write = c.phase == "write"
    name = "DCP" if c.engine == "dcp" else ("torch.save" if write else "torch.load") if c.engine == "torch_save" \
        else c.engine
    work = (["planning"] if c.engine == "dcp" else []) + ["serialization" if write else "deserialization"]
    if c.device != "cpu":
        work.append("device-to-host copy" if write else "host-to-device copy")
    return f"{name}'s {', '.join(work[:-1])}{' and ' if len(work) > 1 else ''}{work[-1]}"


def framework_ci(c: CellFacts) -> str:
    return "" if math.isnan(c.framework_share_low) else f" [{c.framework_share_low:.0%}, {c.framework_share_high:.0%}]"


def _framework_evidence(c: CellFacts) -> str:
    twin = (f"stream on the same bytes reaches {c.stream_GiBps:.2f} GiB/s" if known(c.stream_GiBps) else
            "the rest is inside its storage calls (no stream cell on this shape)")
    work = _framework_work(c)
    verb = "take" if " and " in work or ", " in work else "takes"
    return f"{work} {verb} {c.framework_share:.0%}{framework_ci(c)} of the time; {twin}"


# --- storage ----------------------------------------------------------------------------------------------------------

def _at_ceiling(c: CellFacts) -> Tri:
    return at_least(c.share_low, c.share_high, STORAGE_BOUND) if known(c.ceiling_GiBps) else False


def _storage_evidence(c: CellFacts) -> str:
    above = " (above the one-file-per-rank probe, within the CIs)" if c.share > 1 else ""
    return f"{pct_ci(c.share, c.share_low, c.share_high)} of this shape's streaming ceiling{above}"


def _share_straddles(bound: float) -> Callable[[CellFacts], str]:
    def say(c: CellFacts) -> str:
        return f"its share of the ceiling {pct_ci(c.share, c.share_low, c.share_high)} straddles {bound:.0%}"
    return say


# --- tier and drain -------------------------------------------------------------------------------------------------

def _tier_evidence(c: CellFacts) -> str:
    return (f"{pct_ci(c.share, c.share_low, c.share_high)} of this shape's streaming ceiling to durable: every byte "
            "written to the node-local tier, read back and written again to shared storage")


# --- imbalance --------------------------------------------------------------------------------------------------------

def _heavy(c: CellFacts) -> Tri:
    return c.bytes_max_over_mean >= IMBALANCE_RATIO


def _time_follows(c: CellFacts) -> Tri:
    """False only where measured and the heavy rank's extra time falls short of its extra bytes' share."""
    return not (c.heaviest_time_over_mean - 1 < IMBALANCE_TIME_FOLLOWS * (c.heaviest_bytes_over_movers - 1))


def _closing_bound(c: CellFacts) -> float:
    """The share s of the even ceiling from which even ranks (s × max/mean bytes) close IMBALANCE_CLOSES of the gap
    (1 − s): s·(r − 1) ≥ IMBALANCE_CLOSES·(1 − s)."""
    return IMBALANCE_CLOSES / (c.bytes_max_over_mean - 1 + IMBALANCE_CLOSES)


def _closes(c: CellFacts) -> Tri:
    if not known(c.even_ceiling_GiBps) or not _heavy(c):
        return False
    bound = _closing_bound(c)
    low, high = c.even_share_low, c.even_share_high
    if math.isnan(low) or math.isnan(high):
        return None
    if low >= bound and high < 1:
        return True
    return False if high < bound or low >= 1 else None


def _closes_straddle(c: CellFacts) -> str:
    return (f"its share of the even ceiling {pct_ci(c.even_share, c.even_share_low, c.even_share_high)} straddles "
            f"{_closing_bound(c):.0%} (where even ranks would close {IMBALANCE_CLOSES:.0%} of the gap) or 100%")


def _imbalance_evidence(c: CellFacts) -> str:
    even = c.even_share * c.bytes_max_over_mean
    verb = "writes" if c.phase == "write" else "reads"
    why = f" ({c.heavy_rank_files})" if c.heavy_rank_files else ""
    reach = f"{even:.2f} of the ceiling" if even < 1 else "the ceiling"
    time = "" if math.isnan(c.heaviest_time_over_mean) else f", {c.heaviest_time_over_mean:.2f}× the mean time"
    return (f"the heaviest rank {verb} {c.bytes_max_over_mean:.2f}× the mean bytes{why}{time} — even ranks would "
            f"reach {reach}")


# --- metadata and per-file cost --------------------------------------------------------------------------------------

def _per_file_fsync(c: CellFacts) -> bool:
    return c.phase == "write" and (c.io_mode_used == "direct" or c.bytes_per_file <= SMALL_FILE_BYTES)


def _calls(c: CellFacts) -> list[float]:
    return [c.slowest_open_share, c.slowest_close_share] + ([c.slowest_fsync_share] if _per_file_fsync(c) else [])


def _metadata(c: CellFacts) -> Tri:
    parts = _calls(c)
    return not any(math.isnan(p) for p in parts) and sum(parts) >= METADATA_SHARE


def _metadata_evidence(c: CellFacts) -> str:
    doing = ("creating, fsyncing and closing" if _per_file_fsync(c) else
             "creating and closing" if c.phase == "write" else "opening and closing")
    files = f"its {c.slowest_files:,.0f} files" if not math.isnan(c.slowest_files) else "its files"
    detail = ([f"{c.files:,.0f} per checkpoint"] if not math.isnan(c.files) else []) + \
        ([f"{format_bytes(c.bytes_per_file, 1)} each on average"] if known(c.bytes_per_file) else [])
    tail = f" ({', '.join(detail)})" if detail else ""
    return f"{sum(_calls(c)):.0%} of the slowest rank's time in {doing} {files}{tail}"


def _small_files(c: CellFacts) -> Tri:
    return known(c.bytes_per_file) and c.bytes_per_file <= SMALL_FILE_BYTES and known(c.slowest_files)


def _gap_unexplained(c: CellFacts) -> Tri:
    """The share's interval wholly at or below 1 − METADATA_SHARE: a quarter of the time or more is not the bytes
    streaming at the ceiling."""
    if not known(c.ceiling_GiBps):
        return False
    above = at_least(c.share_low, c.share_high, 1 - METADATA_SHARE + 1e-12)
    return None if above is None else not above


def _per_file_evidence(c: CellFacts) -> str:
    seconds = c.bytes_per_file * c.files / GIB / c.GiBps
    at_ceiling = seconds * c.share
    per_file = (seconds - at_ceiling) / c.slowest_files
    return (f"its {c.files:,.0f} files average {format_bytes(c.bytes_per_file, 1)}: at this shape's ceiling their "
            f"bytes take {at_ceiling:.3g} s of the {seconds:.3g} s per checkpoint; the other "
            f"{seconds - at_ceiling:.3g} s are {per_file * 1e3:.3g} ms per file over the slowest rank's "
            f"{c.slowest_files:,.0f} files: a cost per file (opening, each request's latency, closing), not transfer "
            f"({pct_ci(c.share, c.share_low, c.share_high)} of the ceiling)")


# --- network and memory -----------------------------------------------------------------------------------------------

def _network(c: CellFacts) -> Tri:
    return (c.phase == "read" and c.restore == "broadcast" and share(c.broadcast_GiBps, c.bcast_ceiling_GiBps)
            >= NETWORK_BOUND and c.broadcast_time_share >= NETWORK_TIME_SHARE)


def _network_evidence(c: CellFacts) -> str:
    return (f"broadcast at {share(c.broadcast_GiBps, c.bcast_ceiling_GiBps):.0%} of MPI bandwidth "
            f"({c.broadcast_time_share:.0%} of the restore's time)")


def _memory(c: CellFacts) -> Tri:
    return (c.phase == "write" and c.strategy == "async"
            and share(c.snapshot_GiBps_per_rank, c.memcpy_ceiling_GiBps_per_rank) >= MEMORY_BOUND)


def _memory_evidence(c: CellFacts) -> str:
    s = share(c.snapshot_GiBps_per_rank, c.memcpy_ceiling_GiBps_per_rank)
    return f"the async snapshot copies at {s:.0%} of the host memory-copy ceiling per rank"


RULES: tuple[Rule, ...] = (
    Rule("page_cache_unsynced", "page cache", (Condition(
        "a buffered write without fsync (a write fsynced inside its timed write is durable: never this)",
        _unsynced),), lambda c: "buffered write without fsync: in memory, not durable yet"),
    Rule("page_cache_resident", "page cache", (Condition(
        "a restore whose residency sample (mincore, right before the read) found pages of its files already in "
        "the page cache (not on a memory filesystem: there every page is resident); a restore sampled with 0 "
        "resident is cold, never this", _resident),), _resident_evidence),
    Rule("page_cache_warm", "page cache", (Condition(
        "a warm restore (cold read none) with no residency sample", _warm),),
        lambda c: "warm restore (no cold read): served from memory, not storage"),
    Rule("page_cache_above_cold", "page cache", (Condition(
        "a restore not read with O_DIRECT and with no residency sample", _unsampled_cached_read), BEYOND),
        _above_cold_evidence),
    Rule("framework", "framework", (
        Condition("an engine (torch.save, DCP), not stream", lambda c: c.engine != "stream"),
        Condition(f"its framework's own work (serialization, copies, planning) takes {FRAMEWORK_SHARE:.0%} or more "
                  "of its time: 1 − the time of stream on the same shape and bytes / the engine's, or where the "
                  "study has no such stream cell the time outside its storage calls",
                  lambda c: c.framework_share >= FRAMEWORK_SHARE),
        Condition("that share's 95% CI above 0 where there is one (named before storage: the ceiling is a stream "
                  "probe)", lambda c: not c.framework_share_low <= 0)), _framework_evidence),
    Rule("storage", "storage", (Condition(
        f"its share of the shape's streaming ceiling (the probe measured as the cell: a read's cold-read method, "
        f"a write's I/O mode and fsync) at or above {STORAGE_BOUND:.0%} over the share's whole 95% interval "
        "(from the cell's CI and the ceiling's)", _at_ceiling, _share_straddles(STORAGE_BOUND)),), _storage_evidence),
    Rule("tier_and_drain", "tier and drain", (Condition(
        "a tiered write: durable only once written to the tier, read back and written to shared storage",
        lambda c: c.phase == "write" and c.strategy == "tiered"),), _tier_evidence),
    Rule("imbalance", "imbalance", (
        Condition(f"the heaviest rank carries {IMBALANCE_RATIO:g}× the mean bytes or more", _heavy),
        Condition(f"its time follows its bytes: its time over the mean time of the ranks that moved bytes exceeds 1 "
                  f"by at least {IMBALANCE_TIME_FOLLOWS:.0%} of what its bytes over theirs do (where per-rank times "
                  "are recorded)", _time_follows),
        Condition(f"even ranks (the bandwidth × max / mean bytes) would close {IMBALANCE_CLOSES:.0%} or more of the "
                  "gap to the even ceiling, the share of the even ceiling below 100%, over that share's whole 95% "
                  "interval", _closes, _closes_straddle)), _imbalance_evidence),
    Rule("metadata", "metadata", (Condition(
        f"{METADATA_SHARE:.0%} or more of the slowest rank's time in create/open, close and (direct, or files under "
        f"{format_bytes(SMALL_FILE_BYTES, 0)}) fsync", _metadata),), _metadata_evidence),
    Rule("per_file", "per-file cost", (
        Condition(f"files of {format_bytes(SMALL_FILE_BYTES, 0)} or less on average", _small_files),
        Condition("stream, or an engine whose framework's share is known (else the time may be the framework's)",
                  lambda c: c.engine == "stream" or not math.isnan(c.framework_share)),
        Condition(f"a quarter or more of the time beyond its bytes at the ceiling: its share of the ceiling at or "
                  f"below {1 - METADATA_SHARE:.0%} over the share's whole 95% interval (per-request latency counted "
                  "as a cost per file, not as transfer)", _gap_unexplained, _share_straddles(1 - METADATA_SHARE))),
        _per_file_evidence),
    Rule("network", "network", (Condition(
        f"a broadcast restore whose broadcast runs at {NETWORK_BOUND:.0%} or more of MPI's broadcast ceiling and "
        f"takes {NETWORK_TIME_SHARE:.0%} or more of the restore's time", _network),), _network_evidence),
    Rule("memory", "memory", (Condition(
        f"an async snapshot at {MEMORY_BOUND:.0%} or more of the per-rank memory-copy ceiling", _memory),),
        _memory_evidence),
)
PROBE_SHORT = ("beside any limit but page cache: a figure above its ceiling beyond both CIs is told so (the probe did "
               "not reach this shape's ceiling), with the probe's pattern beside the checkpoint's files, sizes and "
               "method")
OTHERWISE = ("otherwise: nothing measured explains the gap (the figures checked are given); where an earlier rule "
             "could hold but its 95% intervals straddle its bound (or there are none), \"undecided\": the CIs do "
             "not allow a verdict, and what would")


def rules_text() -> list[str]:
    """How the limit is chosen, every condition with the thresholds in force, in RULES' order."""
    return [rule.text for rule in RULES] + [OTHERWISE, PROBE_SHORT]


README_BEGIN = "<!-- rules: printed by python -m studyctl.analysis.hardware.limit_rules from RULES -->"
README_END = "<!-- end of rules -->"


def readme_block() -> str:
    """The README's list of the rules, between its markers: `rules_text()` as Markdown items."""
    return "\n".join([README_BEGIN, *(f"{i}. {line}" for i, line in enumerate(rules_text(), 1)), README_END])


if __name__ == "__main__":
    print(readme_block())
