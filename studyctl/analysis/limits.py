"""What held a cell back: one named limit with its evidence, as a sentence a user can check (issue 18).

Pure rules over one cell × phase's facts (`CellFacts`): each rule is a small function that returns a `Verdict`
when its evidence is there, else None. `RULES` is the one order of precedence: the first rule that speaks names
the limit; when none does, the verdict says that nothing measured explains the gap. Thresholds are named
constants, each with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from studyctl.units import format_bytes

NAN = float("nan")

# At or above this share of its shape's ceiling a cell is at the hardware: single runs on a shared disk swing
# 20% and medians of three ~15% (notes/io-limits.md), so a smaller gap is not evidence of anything else.
STORAGE_BOUND = 0.85
# Above this multiple of the cold/durable ceiling the bytes came from memory: io-limits.md's rule for cached
# restores (1.2× the cold-read limit), applied to writes too.
PAGE_CACHE_MARGIN = 1.2
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
# MiB in, so a buffered fsync counts as per-file cost; above it, its time is the data's flush.
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


@dataclass(frozen=True)
class CellFacts:
    """What the rules may look at, for one cell and phase (NaN / None: not measured)."""

    phase: str  # write | read
    GiBps: float  # the headline bandwidth (total bytes / total time)
    ceiling_GiBps: float | None = None  # the shape's storage streaming ceiling for this phase (largest shard)
    even_ceiling_GiBps: float | None = None  # the same with the bytes spread evenly
    direct_ceiling_GiBps: float | None = None  # the same shape's ceiling with O_DIRECT (None: not measured)
    io_mode_used: str = "direct"
    fsync: bool = True
    cold_read_method: str = "direct"
    strategy: str = "sync"
    restore: str = "rank"
    bytes_max_over_mean: float = NAN  # the heaviest rank's bytes / the mean over all ranks
    heavy_rank_files: str | None = None  # from the layout: what makes the heaviest rank heavy
    heaviest_bytes_over_movers: float = NAN  # the heaviest rank's bytes / the mean of the ranks that moved bytes
    heaviest_time_over_mean: float = NAN  # its time / the mean time of those ranks
    files: float = NAN  # per checkpoint, all ranks
    slowest_files: float = NAN  # the slowest rank's files per checkpoint
    bytes_per_file: float = NAN
    slowest_open_share: float = NAN  # of the slowest rank's time
    slowest_fsync_share: float = NAN
    slowest_close_share: float = NAN
    broadcast_GiBps: float = NAN  # the cell's broadcast: bytes received / the slowest reader's broadcast time
    broadcast_time_share: float = NAN  # of the restore's time
    bcast_ceiling_GiBps: float | None = None
    snapshot_GiBps_per_rank: float = NAN  # async: the heaviest rank's bytes / the time training blocked
    memcpy_ceiling_GiBps_per_rank: float | None = None
    engine: str = "stream"  # how the bytes reached storage: raw (stream) or through a framework
    device: str = "cpu"  # where an engine's tensors lived
    framework_share: float = NAN  # of the engine's time, its framework's own work (`analysis.engines`)
    framework_share_low: float = NAN  # its 95% CI (NaN: none)
    framework_share_high: float = NAN
    framework_basis: str | None = None  # where the share comes from: its stream twin, or its storage-call split
    framework_note: str | None = None  # why an engine cell's share is not known
    stream_GiBps: float = NAN  # the stream cell of the same shape: the same bytes, no framework


@dataclass(frozen=True)
class Verdict:
    limit: str  # page cache | framework | storage | tier and drain | imbalance | metadata | network | memory | none
    #             | unknown
    evidence: str

    @property
    def sentence(self) -> str:
        return f"{self.limit}: {self.evidence}"


def known(x: float | None) -> bool:
    return x is not None and not math.isnan(x) and x > 0


def share(x: float, of: float | None) -> float:
    return x / of if known(of) and of is not None else NAN


def page_cache(c: CellFacts) -> Verdict | None:
    """Bytes that never reached the device: a buffered write not fsynced or above the direct ceiling; a warm read
    or one above the cold-read ceiling."""
    ref = c.direct_ceiling_GiBps if known(c.direct_ceiling_GiBps) else c.ceiling_GiBps
    over = share(c.GiBps, ref)
    which = "the device's direct" if known(c.direct_ceiling_GiBps) else "this shape's durable"
    if c.phase == "write" and c.io_mode_used == "buffered":
        if not c.fsync:
            return Verdict("page cache", "buffered write without fsync: in memory, not durable yet")
        if over > PAGE_CACHE_MARGIN:
            return Verdict("page cache", f"buffered write at {over:.2f}× {which} ceiling, not durable yet")
    if c.phase == "read" and c.cold_read_method != "direct":  # O_DIRECT reads never come from the page cache
        if c.cold_read_method == "none":
            return Verdict("page cache", "warm restore (no cold read): served from memory, not storage")
        if over > PAGE_CACHE_MARGIN:
            return Verdict("page cache", f"restore at {over:.2f}× this shape's cold-read ceiling: served from "
                                         "memory, not storage")
    return None


def _framework_work(c: CellFacts) -> str:
    """"torch.save's serialization and device-to-host copy": what the engine does besides moving the bytes."""
    write = c.phase == "write"
    name = "DCP" if c.engine == "dcp" else ("torch.save" if write else "torch.load") if c.engine == "torch_save" \
        else c.engine
    work = (["planning"] if c.engine == "dcp" else []) + ["serialization" if write else "deserialization"]
    if c.device != "cpu":
        work.append("device-to-host copy" if write else "host-to-device copy")
    return f"{name}'s {', '.join(work[:-1])}{' and ' if len(work) > 1 else ''}{work[-1]}"


def framework(c: CellFacts) -> Verdict | None:
    """An engine's own work (serialization, copies, planning) takes a large share of its time: 1 − stream's time /
    its time on the same shape, or else the time outside its storage calls.

    Before `storage`: the ceiling is a stream probe (one raw file per rank), so an engine cell near the ceiling is
    not storage-bound while stream on the very same bytes is measurably faster (stream's many files can outrun
    the one-file probe); the twin is the direct evidence of what the storage does with these bytes. After `page
    cache`: a figure that never reached the device (no fsync, a warm read) says that first, whatever the engine.
    """
    share = c.framework_share
    if c.engine == "stream" or not share >= FRAMEWORK_SHARE or c.framework_share_low <= 0:  # NaN low: no CI
        return None
    ci = "" if math.isnan(c.framework_share_low) else f" [{c.framework_share_low:.0%}, {c.framework_share_high:.0%}]"
    twin = (f"stream on the same bytes reaches {c.stream_GiBps:.2f} GiB/s" if known(c.stream_GiBps) else
            "the rest is inside its storage calls (no stream cell on this shape)")
    work = _framework_work(c)
    verb = "take" if " and " in work or ", " in work else "takes"
    return Verdict("framework", f"{work} {verb} {share:.0%}{ci} of the time; {twin}")


def storage(c: CellFacts) -> Verdict | None:
    s = share(c.GiBps, c.ceiling_GiBps)
    if s >= STORAGE_BOUND:
        above = " (above the one-file-per-rank probe: the checkpoint's own files stream faster here)" if s > 1 else ""
        return Verdict("storage", f"{s:.0%} of this shape's streaming ceiling{above}")
    return None


def tier_and_drain(c: CellFacts) -> Verdict | None:
    """A tiered checkpoint is durable only when the drain has copied it: every byte is written twice (the tier,
    then shared storage), read once between, so its rate to durable is at most about half the streaming ceiling
    where tier and shared storage share a device (as on one machine)."""
    if c.phase != "write" or c.strategy != "tiered":
        return None
    s = share(c.GiBps, c.ceiling_GiBps)
    return Verdict("tier and drain", f"{s:.0%} of this shape's streaming ceiling to durable: every byte written to "
                                     "the node-local tier, read back and written again to shared storage")


def imbalance(c: CellFacts) -> Verdict | None:
    """The heaviest rank carries more bytes than the mean, its time follows its bytes, and spreading them evenly
    would close most of the gap: the cell's bandwidth × max/mean bytes, against the even ceiling."""
    ratio = c.bytes_max_over_mean
    now = share(c.GiBps, c.even_ceiling_GiBps)
    if not (ratio >= IMBALANCE_RATIO) or not (now < 1):
        return None
    extra_time = c.heaviest_time_over_mean - 1
    if extra_time < IMBALANCE_TIME_FOLLOWS * (c.heaviest_bytes_over_movers - 1):  # False when not measured: named
        return None
    even = now * ratio
    if (even - now) / (1 - now) < IMBALANCE_CLOSES:
        return None
    verb = "writes" if c.phase == "write" else "reads"
    why = f" ({c.heavy_rank_files})" if c.heavy_rank_files else ""
    reach = f"{even:.2f} of the ceiling" if even < 1 else "the ceiling"
    return Verdict("imbalance", f"the heaviest rank {verb} {ratio:.2f}× the mean bytes{why} — even ranks would "
                                f"reach {reach}")


def metadata(c: CellFacts) -> Verdict | None:
    """Per-file calls (create/open, close; fsync where it is not the data's flush) take the slowest rank's time."""
    per_file_fsync = c.phase == "write" and (c.io_mode_used == "direct" or c.bytes_per_file <= SMALL_FILE_BYTES)
    parts = [c.slowest_open_share, c.slowest_close_share] + ([c.slowest_fsync_share] if per_file_fsync else [])
    if any(math.isnan(p) for p in parts):
        return None
    spent = sum(parts)
    if spent < METADATA_SHARE:
        return None
    doing = ("creating, fsyncing and closing" if per_file_fsync else
             "creating and closing" if c.phase == "write" else "opening and closing")
    files = f"its {c.slowest_files:,.0f} files" if not math.isnan(c.slowest_files) else "its files"
    detail = ([f"{c.files:,.0f} per checkpoint"] if not math.isnan(c.files) else []) + \
        ([f"{format_bytes(c.bytes_per_file, 1)} each on average"] if known(c.bytes_per_file) else [])
    tail = f" ({', '.join(detail)})" if detail else ""
    return Verdict("metadata", f"{spent:.0%} of the slowest rank's time in {doing} {files}{tail}")


def network(c: CellFacts) -> Verdict | None:
    if c.phase != "read" or c.restore != "broadcast":
        return None
    s = share(c.broadcast_GiBps, c.bcast_ceiling_GiBps)
    if s >= NETWORK_BOUND and c.broadcast_time_share >= NETWORK_TIME_SHARE:
        return Verdict("network", f"broadcast at {s:.0%} of MPI bandwidth ({c.broadcast_time_share:.0%} of the "
                                  "restore's time)")
    return None


def memory(c: CellFacts) -> Verdict | None:
    if c.phase != "write" or c.strategy != "async":
        return None
    s = share(c.snapshot_GiBps_per_rank, c.memcpy_ceiling_GiBps_per_rank)
    if s >= MEMORY_BOUND:
        return Verdict("memory", f"the async snapshot copies at {s:.0%} of the host memory-copy ceiling per rank")
    return None


RULES: tuple[Callable[[CellFacts], Verdict | None], ...] = (page_cache, framework, storage, tier_and_drain,
                                                          imbalance, metadata, network, memory)


def _nothing(c: CellFacts) -> Verdict:
    engine = [f"engine {c.engine}: {_framework_checked(c)}"] if c.engine != "stream" else []
    if not known(c.ceiling_GiBps):
        return Verdict("unknown", "; ".join(["no ceiling measured for this shape", *engine]))
    said = [f"{share(c.GiBps, c.ceiling_GiBps):.0%} of this shape's streaming ceiling"]
    if not math.isnan(c.bytes_max_over_mean):
        time = "" if math.isnan(c.heaviest_time_over_mean) else f" and {c.heaviest_time_over_mean:.2f}× the mean time"
        said.append(f"the heaviest rank at {c.bytes_max_over_mean:.2f}× the mean bytes{time}")
    per_file = [c.slowest_open_share, c.slowest_close_share]
    said.append("no per-rank time split recorded" if any(math.isnan(p) for p in per_file) else
                f"{sum(per_file):.0%} of the slowest rank's time in opening and closing files")
    return Verdict("none", "nothing measured explains the gap: " + "; ".join([*said, *engine]))


def _framework_checked(c: CellFacts) -> str:
    """What the framework rule found where it did not speak: the share and its CI, or why there is none."""
    if math.isnan(c.framework_share):
        return c.framework_note or "the framework's share not known"
    ci = "" if math.isnan(c.framework_share_low) else f" [{c.framework_share_low:.0%}, {c.framework_share_high:.0%}]"
    return f"the framework's share {c.framework_share:.0%}{ci} ({c.framework_basis or 'basis not recorded'})"


def name_limit(c: CellFacts) -> Verdict:
    """The first rule in RULES that has its evidence; else what was checked and found not to explain the gap."""
    for rule in RULES:
        verdict = rule(c)
        if verdict is not None:
            return verdict
    return _nothing(c)
