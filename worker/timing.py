"""From per-rank stamps to the figures we report (pure functions).

Aggregate bandwidth = bytes / (max end − min start): the time the job as a whole was checkpointing.
MLPerf's rule: duration = slowest rank, throughput = min over ranks of global size / rank duration. DLIO's numbers are
recomputed its way (rank 0's records, mean of per-checkpoint rates) only for comparison.
A rank's split (where its duration went: open, transfer, fsync, close, the rest) comes from the seconds its
`worker.io.Split` summed; `other_s` is what is left of the duration, never negative.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from studyctl.definition.result.result_schema import (
    CheckpointTiming,
    DlioCompat,
    Phase,
    PhaseSummary,
    RankRequests,
    RankSplit,
    RankTiming,
    mlperf_throughput_GiBps,
)
from studyctl.units import GIB

SplitSeconds = tuple[float, float, float, float]  # (open, transfer, fsync, close) of one rank, as io.Split sends
# Per rank: (rank, host, start, end, bytes, files, split or None), clocks in epoch seconds
Stamp = tuple[int, str, float, float, int, int, SplitSeconds | None]


def rank_split(duration: float, parts: SplitSeconds) -> RankSplit:
    """The four measured parts as summed, and `other_s` = duration − their sum, floored at 0. The parts are
    timed inside the rank's own start and end stamps (one monotonic clock), so their sum stays within it."""
    open_s, transfer_s, fsync_s, close_s = parts
    return RankSplit(open_s=open_s, transfer_s=transfer_s, fsync_s=fsync_s, close_s=close_s,
                     other_s=max(duration - (open_s + transfer_s + fsync_s + close_s), 0.0))


def rank_timing(rank: int, host: str, start: float, end: float, nbytes: int, files: int, origin: float,
                split: SplitSeconds | None = None, requests: Any = None) -> RankTiming:
    """`requests`: an object store's RequestCounts of the rank's phase (None on a POSIX filesystem)."""
    duration = max(end - start, 0.0)
    rate = nbytes / duration / GIB if duration > 0 and nbytes else 0.0
    return RankTiming(rank=rank, host=host, start_s=start - origin, end_s=end - origin, bytes=nbytes, files=files,
                      duration_s=duration, bandwidth_GiBps=rate,
                      split=rank_split(duration, split) if split is not None else None,
                      requests=RankRequests(**asdict(requests)) if requests is not None else None)


def checkpoint_timing(phase: Phase, index: int, step_dir: str, stamps: Sequence[Stamp],
                      requests: Mapping[int, Any] | None = None,
                      resident: tuple[int, int] | None = None) -> CheckpointTiming:
    """`stamps`: per rank (rank, host, start, end, bytes, files, split), clocks in epoch seconds; `requests`:
    per rank, an object store's request counts (worker.objects); `resident`: a restore's (pages resident, pages
    sampled) over every rank's files right before the read (worker.residency)."""
    origin = min(s[2] for s in stamps)
    got = requests or {}
    ranks = [rank_timing(r, h, s, e, b, f, origin, sp, got.get(r))
             for r, h, s, e, b, f, sp in sorted(stamps, key=lambda s: s[0])]
    total = sum(r.bytes for r in ranks)
    span = max(r.end_s for r in ranks)  # origin is the earliest start
    movers = [r.bandwidth_GiBps for r in ranks if r.bytes]
    return CheckpointTiming(
        phase=phase, index=index, step_dir=step_dir, bytes=total, files=sum(r.files for r in ranks),
        duration_max_s=max(r.duration_s for r in ranks), span_s=span,
        aggregate_GiBps=total / span / GIB if span > 0 else 0.0,
        rank_bandwidth_min_GiBps=min(movers) if movers else 0.0,
        rank_bandwidth_max_GiBps=max(movers) if movers else 0.0,
        ranks=ranks,
        resident_pages_before=resident[0] if resident is not None else None,
        pages_sampled=resident[1] if resident is not None else None,
    )


def _stdev(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def phase_summary(timings: Sequence[CheckpointTiming]) -> PhaseSummary:
    rates = [t.aggregate_GiBps for t in timings]
    durations = [t.duration_max_s for t in timings]
    return PhaseSummary(
        checkpoints=len(timings), bytes_per_checkpoint=timings[0].bytes,
        aggregate_GiBps_mean=statistics.fmean(rates), aggregate_GiBps_stdev=_stdev(rates),
        aggregate_GiBps_min=min(rates), aggregate_GiBps_max=max(rates),
        duration_s_mean=statistics.fmean(durations), duration_s_stdev=_stdev(durations),
        duration_max_s=max(durations),
        rank_bandwidth_min_GiBps=min(t.rank_bandwidth_min_GiBps for t in timings),
        mlperf_duration_s_mean=statistics.fmean(durations),
        mlperf_throughput_GiBps_mean=statistics.fmean(mlperf_throughput_GiBps(t) for t in timings),
    )


def dlio_compat(checkpoint_bytes: int, timings: Sequence[CheckpointTiming]) -> DlioCompat:
    """DLIO's summary metrics: rank 0's duration per checkpoint, total size over it, mean of rates."""
    out: dict[str, float] = {"checkpoint_size_GB": checkpoint_bytes / GIB}
    for phase, prefix in (("write", "save"), ("read", "load")):
        mine = [t for t in timings if t.phase == phase]
        if not mine:
            continue
        durations = [next(r.duration_s for r in t.ranks if r.rank == 0) for t in mine]
        rates = [t.bytes / GIB / d if d > 0 else 0.0 for t, d in zip(mine, durations, strict=True)]
        out[f"{prefix}_checkpoint_io_mean_GB_per_second"] = statistics.fmean(rates)
        out[f"{prefix}_checkpoint_io_stdev_GB_per_second"] = statistics.pstdev(rates)
        out[f"{prefix}_checkpoint_duration_mean_seconds"] = statistics.fmean(durations)
        out[f"{prefix}_checkpoint_duration_stdev_seconds"] = statistics.pstdev(durations)
    return DlioCompat(**out)
