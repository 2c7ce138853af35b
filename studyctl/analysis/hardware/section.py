"""The report's "How close to the hardware" tables, declared once: per cell and phase its share of the measured
ceiling and the limit that binds; per resource shape its measured ceilings."""

from __future__ import annotations

from typing import Any

from studyctl.analysis.section import Column, Section, size

HARDWARE = Section("hardware", (
    Column("phase", "phase", "text", align="left"),
    Column("GiB/s [95% CI]", "GiBps_text", "text"),
    Column("ceiling GiB/s\n[95% CI]", "ceiling_text", "text"),
    Column("share of ceiling\n[95% CI]", "ceiling_share_text", "text", strong="both"),
    Column("share of even\nceiling [95% CI]", "even_share_text", "text"),
    Column("% of\nstated peak", "peak_share", "pct", when="peaks"),
    Column("slowest rank: open /\ntransfer / fsync / close", "slowest_split", "text"),
    Column("mean rank", "mean_split", "text"),
    Column("bytes per rank:\nmax / mean", "bytes_text", "text"),
    Column("limit", "limit", "text", align="left", strong="both"),
    Column("evidence", "limit_evidence", "text", align="left"),
), axes=True, wide=True)


def _shard_and_even(s: dict[str, Any]) -> str:
    return f"{size(s['largest_shard_bytes'])} / {size(s['even_bytes'])}"


SHAPES = Section("shapes", (
    Column("shape", "shape", "code", align="left"),
    Column("points", "points"),
    Column("rounds", "rounds"),
    Column("read", "read_method", "text", align="left"),
    Column("bytes per rank:\nlargest shard / even", _shard_and_even),
    Column("write", "storage_write_GiBps_text", "text"),
    Column("read", "storage_read_GiBps_text", "text"),
    Column("even write", "even_write_GiBps_text", "text"),
    Column("even read", "even_read_GiBps_text", "text"),
    Column("MPI broadcast", "network_bcast_GiBps_text", "text"),
    Column("memory copy\nper rank", "memcpy_GiBps_per_rank_text", "text"),
), wide=True)
