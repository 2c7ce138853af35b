"""Adequacy flags: reasons a cell's figure should not be read at face value, said next to the figure.

A flag never hides a figure; tables, plots and the report carry it beside the number.
"""

from __future__ import annotations

from typing import Any

from studyctl.analysis.values import missing
from studyctl.definition.checkpoint.restore_rules import named_rule

SHORT_CHECKPOINT_S = 1.0  # a checkpoint timed in less than this measures latency and noise as much as bandwidth
MIN_REPETITIONS = 3  # fewer: the 95% interval rests on one or two degrees of freedom
MAX_RELATIVE_CI = 0.25  # a 95% CI half-width over this share of the figure: too noisy to rank cells
MEMORY_FSTYPES = frozenset({"tmpfs", "ramfs", "hugetlbfs"})
STATED_COLD = "cold (stated at import)"  # cold_read_method of DLIO reads the user says were cold (--dlio-reads)


def reads_memory(row: dict[str, Any]) -> bool:
    """Whether a cell's restores read from a memory filesystem (its own, or a tiered cell's tier): there every page
    of a file is in the page cache by construction, so a residency sample says nothing about a cold read."""
    tiered = str(row.get("strategy")) == "tiered" and str(row.get("tier_fstype")) in MEMORY_FSTYPES
    return str(row.get("fstype")) in MEMORY_FSTYPES or tiered


def is_dlio(tool: Any) -> bool:
    """Rows imported from DLIO: tool "dlio", or "dlio, checkpoint class <name>" for a custom checkpoint class."""
    return str(tool) == "dlio" or str(tool).startswith("dlio, ")


def tool_label(tool: str) -> str:
    """How a tool's rows are named in a series or a cell: "DLIO", "DLIO, checkpoint class X"."""
    return "DLIO" + tool.removeprefix("dlio") if is_dlio(tool) else tool


def dlio_label(row: dict[str, Any]) -> str:
    """What an imported DLIO run was, from its config and the user: "DLIO, warm reads, no fsync", ..."""
    reads = "cold reads (as stated at import)" if row.get("cold_read_method") == STATED_COLD else "warm reads"
    fsync = "fsync unknown (custom checkpoint class)" if missing(row.get("fsync")) else (
        "fsync" if row.get("fsync") else "no fsync")
    return f"{tool_label(str(row.get('tool')))}, {reads}, {fsync}"


def _number(x: Any) -> float | None:
    """A figure of a row, None when missing (None or NaN)."""
    return None if missing(x) else float(x)


def _read_flags(row: dict[str, Any]) -> list[str]:
    if is_dlio(row.get("tool")):
        return []  # said once by the DLIO label
    flags = []
    if row.get("cold_read_method") == "none":
        flags.append("warm reads (cold_read none)")
    # reads files another rank wrote: a shift, or a mode where every replica reads the shared states itself
    rule = named_rule(row.get("restore"))
    shifted = (row.get("rank_shift") or 0) > 0 or (rule is not None and rule.every_rank_reads_shared)
    # another "node's" files are in this machine's one page cache; only O_DIRECT reads stay cold
    if row.get("simulated_nodes") and shifted and row.get("cold_read_method") not in ("direct", "no_cache"):
        flags.append("warm reads: simulated nodes share one page cache")
    return flags


MEMORY_TIER = "memory tier"  # a tiered restore read (some of) its bytes from a node's memory, not storage
NO_FAILURE_RESTORE = "no-failure restore"  # replaced_nodes 0: no node lost its tier, unlike after a failure
# a flag with one of these: the read was not a cold storage read (DLIO reads are warm unless the user states cold)
NOT_COLD_WORDS = ("warm", "memory")


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
    if is_dlio(row.get("tool")):
        flags.append(dlio_label(row))
    if str(row.get("fstype")) in MEMORY_FSTYPES:
        flags.append("memory filesystem, not storage")
    if (row.get("fsync") is False or row.get("fsync") == 0) and not is_dlio(row.get("tool")):
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


def no_measurable_interference(row: dict[str, Any]) -> bool:
    """A background strategy whose interference CI contains 0: the slowdown is not told apart from noise."""
    mean, ci = _number(row.get("interference_s")), _number(row.get("interference_s_ci95"))
    return row.get("strategy") in ("async", "tiered") and mean is not None and ci is not None and abs(mean) <= ci


def cost_flags(row: dict[str, Any]) -> list[str]:
    """What makes one cell's training cost hard to act on, beyond the summary's flags."""
    flags = []
    if row.get("simulated_nodes"):
        flags.append("simulated nodes (one host)")
    if str(row.get("tier_fstype")) in MEMORY_FSTYPES:
        flags.append(f"{MEMORY_TIER} ({row['tier_fstype']})")
    source = str(row.get("restore_source", ""))
    if NO_FAILURE_RESTORE in source:
        flags.append(f"{NO_FAILURE_RESTORE} (replaced_nodes 0: every tier intact)")
    elif source.startswith("cell with"):
        flags.append(f"restore after a failure from the {source}")
    if row.get("contention"):
        flags.append("contention: ranks + background threads > host cores")
    if int(_number(row.get("n")) or 0) == 1:
        flags.append("one repetition")
    if "not measured" in str(row.get("relaunch_source", "")):
        flags.append("relaunch not measured: 0 s assumed")
    if no_measurable_interference(row):
        flags.append("no measurable interference")
    return flags
