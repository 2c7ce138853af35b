"""The named-limit rules, declared: each `Rule` names a limit, lists its conditions (each a printed clause and the
test it stands for, `limit_conditions`) and says its evidence (`limit_evidence`). `RULES` is the one order of
precedence (`hardware.limits.name_limit` applies it); the printed rules (report, README) are `rules_text()`, made
from these objects, so every condition is stated with the thresholds in force (`limit_bounds`).
"""

from __future__ import annotations

import math

from studyctl.analysis.hardware import limit_conditions as test
from studyctl.analysis.hardware import limit_evidence as say
from studyctl.analysis.hardware.limit_bounds import (
    FRAMEWORK_SHARE,
    IMBALANCE_CLOSES,
    IMBALANCE_RATIO,
    IMBALANCE_TIME_FOLLOWS,
    MEMORY_BOUND,
    METADATA_SHARE,
    NETWORK_BOUND,
    NETWORK_TIME_SHARE,
    SMALL_FILE_BYTES,
    STORAGE_BOUND,
)
from studyctl.analysis.hardware.limit_conditions import Condition, Rule
from studyctl.analysis.hardware.limit_facts import beyond_both
from studyctl.units import format_bytes

BEYOND = Condition("its figure's 95% interval lies above the same-method probe's (beyond both CIs)", beyond_both,
                   test.overlap)

RULES: tuple[Rule, ...] = (
    Rule("page_cache_unsynced", "page cache", (Condition(
        "a buffered write without fsync (a write fsynced inside its timed write is durable: never this)",
        test.unsynced),), say.unsynced),
    Rule("page_cache_resident", "page cache", (Condition(
        "a restore whose residency sample (mincore, right before the read) found pages of its files already in "
        "the page cache (not on a memory filesystem: there every page is resident); a restore sampled with 0 "
        "resident is cold, never this", test.resident),), say.resident),
    Rule("page_cache_warm", "page cache", (Condition(
        "a warm restore (cold read none) with no residency sample", test.warm),), say.warm),
    Rule("page_cache_above_cold", "page cache", (Condition(
        "a restore not read with O_DIRECT and with no residency sample", test.unsampled_cached_read), BEYOND),
        say.above_cold),
    Rule("framework", "framework", (
        Condition("an engine (torch.save, DCP), not stream", lambda c: c.engine != "stream"),
        Condition(f"its framework's own work (serialization, copies, planning) takes {FRAMEWORK_SHARE:.0%} or more "
                  "of its time: 1 − the time of stream on the same shape and bytes / the engine's, or where the "
                  "study has no such stream cell the time outside its storage calls",
                  lambda c: c.framework_share >= FRAMEWORK_SHARE),
        Condition("that share's 95% CI above 0 where there is one (named before storage: the ceiling is a stream "
                  "probe)", lambda c: not c.framework_share_low <= 0)), say.framework),
    Rule("storage", "storage", (Condition(
        f"its share of the shape's streaming ceiling (the probe measured as the cell: a read's cold-read method, "
        f"a write's I/O mode and fsync) at or above {STORAGE_BOUND:.0%} over the share's whole 95% interval "
        "(from the cell's CI and the ceiling's)", test.at_ceiling, test.share_straddles(STORAGE_BOUND)),), say.storage),
    Rule("tier_and_drain", "tier and drain", (Condition(
        "a tiered write: durable only once written to the tier, read back and written to shared storage",
        lambda c: c.phase == "write" and c.strategy == "tiered"),), say.tier),
    Rule("imbalance", "imbalance", (
        Condition(f"the heaviest rank carries {IMBALANCE_RATIO:g}× the mean bytes or more (the layout's bytes, "
                  "exact: no interval)", test.heavy),
        Condition(f"its time follows its bytes: its time over the mean time of the ranks that moved bytes exceeds 1 "
                  f"by at least {IMBALANCE_TIME_FOLLOWS:.0%} of what its bytes over theirs do, over that time "
                  "ratio's whole 95% interval (Student t over the logarithms of the cell's checkpoints; where "
                  "per-rank times are recorded)", test.time_follows, test.time_straddles),
        Condition(f"even ranks (the bandwidth × max / mean bytes) would close {IMBALANCE_CLOSES:.0%} or more of the "
                  "gap to the even ceiling, the share of the even ceiling below 100%, over that share's whole 95% "
                  "interval", test.closes, test.closes_straddle)), say.imbalance),
    Rule("metadata", "metadata", (Condition(
        f"{METADATA_SHARE:.0%} or more of the slowest rank's time in create/open, close and (direct, or files under "
        f"{format_bytes(SMALL_FILE_BYTES, 0)}) fsync, over that share's whole 95% interval (Student t over the cell's "
        "checkpoints)", test.metadata, test.metadata_straddles),), say.metadata),
    Rule("per_file", "per-file cost", (
        Condition(f"files of {format_bytes(SMALL_FILE_BYTES, 0)} or less on average", test.small_files),
        Condition("stream, or an engine whose framework's share is known (else the time may be the framework's)",
                  lambda c: c.engine == "stream" or not math.isnan(c.framework_share)),
        Condition(f"a quarter or more of the time beyond its bytes at the ceiling: its share of the ceiling at or "
                  f"below {1 - METADATA_SHARE:.0%} over the share's whole 95% interval (per-request latency counted "
                  "as a cost per file, not as transfer)", test.gap_unexplained,
                  test.share_straddles(1 - METADATA_SHARE))), say.per_file),
    Rule("network", "network", (Condition(
        f"a broadcast restore whose broadcast runs at {NETWORK_BOUND:.0%} or more of MPI's broadcast ceiling and "
        f"takes {NETWORK_TIME_SHARE:.0%} or more of the restore's time", test.network),), say.network),
    Rule("memory", "memory", (Condition(
        f"an async snapshot at {MEMORY_BOUND:.0%} or more of the per-rank memory-copy ceiling", test.memory),),
        say.memory),
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
