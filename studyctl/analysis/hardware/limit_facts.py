"""What the named-limit rules may look at for one cell × phase (`CellFacts`), and the three-valued comparisons
they decide with: a figure with a 95% interval is above a threshold (True), below it (False), or the interval
straddles it, or there is none (None: the CIs do not tell)."""

from __future__ import annotations

import math
from dataclasses import dataclass

NAN = float("nan")
Tri = bool | None  # holds, does not hold, the CIs do not tell


@dataclass(frozen=True)
class CellFacts:
    """What the rules may look at, for one cell and phase (NaN / None: not measured)."""

    phase: str  # write | read
    GiBps: float  # the headline bandwidth (total bytes / total time)
    GiBps_low: float = NAN  # its 95% CI over repetitions (NaN: one repetition)
    GiBps_high: float = NAN
    n: int = 0  # repetitions
    # the shape's storage streaming ceiling for this phase (largest shard per rank), measured the same way as the
    # cell (a read's cold-read method, a write's I/O mode): like with like; its 95% CI from the probe's rounds
    ceiling_GiBps: float | None = None
    ceiling_low: float = NAN
    ceiling_high: float = NAN
    ceiling_rounds: int = 0  # rounds recorded (0: a result written before rounds were recorded: no CI)
    share_low: float = NAN  # the share GiBps / ceiling with its 95% CI from both the cell's CI and the ceiling's
    share_high: float = NAN
    ceiling_method: str | None = None  # how the probe read (direct, fadvise): the cell's own where it is known
    ceiling_note: str | None = None  # why a probe of this shape is not this cell's ceiling (it read another way)
    even_ceiling_GiBps: float | None = None  # the same with the bytes spread evenly
    even_share_low: float = NAN
    even_share_high: float = NAN
    probe_bytes_per_rank: float = NAN  # the probe's one file per rank (the largest shard)
    world_size: int = 0
    io_mode_used: str = "direct"
    fsync: bool = True
    cold_read_method: str = "direct"
    strategy: str = "sync"
    restore: str = "rank"
    # restores: over the cell's reads, pages in the page cache right before the read, of those sampled (mincore);
    # NaN: not sampled
    resident_pages_before: float = NAN
    pages_sampled: float = NAN
    bytes_max_over_mean: float = NAN  # the heaviest rank's bytes / the mean over all ranks
    heavy_rank_files: str | None = None  # from the layout: what makes the heaviest rank heavy
    heaviest_bytes_over_movers: float = NAN  # the heaviest rank's bytes / the mean of the ranks that moved bytes
    heaviest_time_over_mean: float = NAN  # its time / the mean time of those ranks
    # per-rank figures' 95% intervals over the cell's checkpoints (`rank_intervals`; NaN: fewer than two)
    heaviest_time_low: float = NAN
    heaviest_time_high: float = NAN
    rank_checkpoints: int = 0  # the checkpoints (repetitions × writes or reads) the per-rank figures average
    files: float = NAN  # per checkpoint, all ranks
    slowest_files: float = NAN  # the slowest rank's files per checkpoint
    bytes_per_file: float = NAN
    slowest_open_share: float = NAN  # of the slowest rank's time
    slowest_fsync_share: float = NAN
    slowest_close_share: float = NAN
    calls_share_low: float = NAN  # the slowest rank's open + close share's 95% interval
    calls_share_high: float = NAN
    calls_fsync_share_low: float = NAN  # its open + close + fsync share's
    calls_fsync_share_high: float = NAN
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

    @property
    def share(self) -> float:
        return share(self.GiBps, self.ceiling_GiBps)

    @property
    def even_share(self) -> float:
        return share(self.GiBps, self.even_ceiling_GiBps)

    @property
    def sampled(self) -> bool:
        """A residency sample was taken before the reads (mincore)."""
        return known(self.pages_sampled)


def known(x: float | None) -> bool:
    return x is not None and not math.isnan(x) and x > 0


def share(x: float, of: float | None) -> float:
    return x / of if known(of) and of is not None else NAN


def has_ci(low: float, high: float) -> bool:
    return not (math.isnan(low) or math.isnan(high))


def at_least(low: float, high: float, bound: float) -> Tri:
    """Whether a figure with the 95% interval [low, high] is at or above `bound`: its whole interval (True), none
    of it (False), or the interval straddles it or there is none (None)."""
    if not has_ci(low, high):
        return None
    return True if low >= bound else False if high < bound else None


def beyond_both(c: CellFacts) -> Tri:
    """The cell's figure above its ceiling beyond both CIs (its low end above the ceiling's high end): True; its
    share's interval at or below 1 (not above the ceiling): False; else the CIs do not tell."""
    if not known(c.ceiling_GiBps):
        return False
    if has_ci(c.GiBps_low, c.ceiling_high) and c.GiBps_low > c.ceiling_high:
        return True
    if has_ci(c.share_low, c.share_high) and c.share_high <= 1:
        return False
    return None


def pct_ci(value: float, low: float, high: float) -> str:
    """"91% [70%, 118%]", or "91% (no CI)", or "unknown" where there is no figure (no ceiling to share)."""
    if math.isnan(value):
        return "unknown"
    return f"{value:.0%} [{low:.0%}, {high:.0%}]" if has_ci(low, high) else f"{value:.0%} (no CI)"


def rate_ci(value: float, low: float, high: float) -> str:
    """"1.23 [1.10, 1.31] GiB/s", or "1.23 GiB/s (no CI)"."""
    return f"{value:.2f} [{low:.2f}, {high:.2f}] GiB/s" if has_ci(low, high) else f"{value:.2f} GiB/s (no CI)"


def no_ci(c: CellFacts) -> str | None:
    """Why the cell's share has no interval at all (None: it has one)."""
    if known(c.ceiling_GiBps) and c.ceiling_rounds < 2:
        return "no CI for the ceiling (its result records fewer than two rounds)"
    if c.n < 2:
        return "no CI for the cell (one repetition)"
    return None


def what_would_tell(c: CellFacts) -> str:
    """What would narrow the intervals enough for a verdict: the cell's repetitions, the probe's rounds."""
    cell = ("one repetition of the cell has no CI: more repetitions" if c.n < 2 else
            f"more repetitions of the cell (n = {c.n}, ±{_half(c.GiBps, c.GiBps_low, c.GiBps_high)})")
    if not known(c.ceiling_GiBps):
        probe = "no ceiling measured for this shape: measure one (the sweep's `ceilings: on`)"
    elif c.ceiling_rounds < 2:
        probe = "the ceiling records no rounds (a result from before they were recorded): no CI; measure it again"
    else:
        width = _factor(c.ceiling_low, c.ceiling_high)
        probe = f"more rounds of the ceiling probe ({c.ceiling_rounds} rounds, {width})"
    return f"{cell}; {probe}"


def _factor(low: float, high: float) -> str:
    """A log-scale interval's width: "×/÷ 1.25" (as wide below the figure as a factor as above it)."""
    return f"×/÷ {math.sqrt(high / low):.2f}" if has_ci(low, high) and low > 0 else "no CI"


def _half(value: float, low: float, high: float) -> str:
    return f"{(high - low) / 2 / value:.0%}" if has_ci(low, high) and value > 0 else "?"
