"""Adequacy flags: reasons a cell's figure should not be read at face value, said next to the figure.

A flag never hides a figure; tables, plots and the report carry it beside the number.
"""

from __future__ import annotations

from typing import Any

from studyctl.analysis.values import missing

SHORT_CHECKPOINT_S = 1.0  # a checkpoint timed in less than this measures latency and noise as much as bandwidth
MIN_REPETITIONS = 3  # fewer: the 95% interval rests on one or two degrees of freedom
MAX_RELATIVE_CI = 0.25  # a 95% CI half-width over this share of the figure: too noisy to rank cells
MEMORY_FSTYPES = frozenset({"tmpfs", "ramfs", "hugetlbfs"})
DLIO_LABEL = "DLIO, warm reads, no fsync"


def tool_label(tool: str) -> str:
    """How a tool's rows are named: DLIO reads right after writing (page cache) and never fsyncs."""
    return DLIO_LABEL if tool == "dlio" else tool


def _number(x: Any) -> float | None:
    """A figure of a row, None when missing (None or NaN)."""
    return None if missing(x) else float(x)


def _read_flags(row: dict[str, Any]) -> list[str]:
    if row.get("tool") == "dlio":
        return []  # said once by the DLIO label
    flags = []
    if row.get("cold_read_method") == "none":
        flags.append("warm reads (cold_read none)")
    shifted = (row.get("rank_shift") or 0) > 0 or row.get("restore") == "full"
    # another "node's" files are in this machine's one page cache; only O_DIRECT reads stay cold
    if row.get("simulated_nodes") and shifted and row.get("cold_read_method") != "direct":
        flags.append("warm reads: simulated nodes share one page cache")
    return flags


MEMORY_TIER = "memory tier"  # a tiered restore read (some of) its bytes from a node's memory, not storage
NO_FAILURE_RESTORE = "no-failure restore"  # replaced_nodes 0: no node lost its tier, unlike after a failure
NOT_COLD_WORDS = ("warm", "memory", "DLIO")  # a flag with one of these: the read was not a cold storage read


def not_a_cold_read(flags: Any) -> bool:
    """The one rule of which cells are never shown as cold reads (plots draw them hollow; no "best cold read")."""
    text = "; ".join(flags) if isinstance(flags, list) else str(flags or "")
    return any(word in text for word in NOT_COLD_WORDS)


def _tier_flags(row: dict[str, Any]) -> list[str]:
    """A tiered restore: nodes that kept their tier read it (memory when the tier is a memory filesystem)."""
    if row.get("strategy") != "tiered":
        return []
    replaced = int(_number(row.get("replaced_nodes")) or 0)
    flags = []
    if str(row.get("tier_fstype")) in MEMORY_FSTYPES and replaced < int(_number(row.get("nodes")) or 1):
        flags.append(MEMORY_TIER)
    if replaced == 0:
        flags.append(NO_FAILURE_RESTORE)
    return flags


def cell_flags(row: dict[str, Any]) -> list[str]:
    """The flags of one summary row (a cell × phase)."""
    flags = []
    if row.get("tool") == "dlio":
        flags.append(DLIO_LABEL)
    if str(row.get("fstype")) in MEMORY_FSTYPES:
        flags.append("memory filesystem, not storage")
    if row.get("fsync") is False or row.get("fsync") == 0:
        flags.append("no fsync")  # mirrors DLIO: what was written may not be on stable storage
    used, asked = row.get("io_mode_used"), row.get("io_mode")
    if not missing(used) and not missing(asked) and used != asked:
        flags.append(f"fell back: {asked} ran as {used}")
    if row.get("phase") == "read":
        flags += _read_flags(row) + _tier_flags(row)
    span = _number(row.get("span_s_mean"))
    if span is not None and span < SHORT_CHECKPOINT_S:
        flags.append(f"checkpoint < {SHORT_CHECKPOINT_S:g} s")
    n = int(_number(row.get("n")) or 0)
    if n < MIN_REPETITIONS:
        flags.append(f"n = {n} < {MIN_REPETITIONS} repetitions")
    ci, value = _number(row.get("bytes_over_time_GiBps_ci95")), _number(row.get("bytes_over_time_GiBps"))
    if ci is not None and value is not None and value > 0 and ci / value > MAX_RELATIVE_CI:
        flags.append(f"95% CI ±{ci / value:.0%} > {MAX_RELATIVE_CI:.0%}")
    return flags
