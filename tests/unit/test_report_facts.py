"""The report's opening facts: which settings do not vary, and which read is the study's best cold read."""

from __future__ import annotations

from pathlib import Path

from studyctl.analysis.adequacy import MEMORY_TIER, NO_FAILURE_RESTORE
from studyctl.analysis.collect import collect
from studyctl.analysis.report.context import best_figures, fixed_settings
from studyctl.analysis.tables import build_tables
from tests.resultgen import axis_study, make_point, write_result


def test_what_ran_varies_when_it_varies(tmp_path: Path) -> None:
    """buffered and direct points: io_mode_used and cold_read_method take two values each: never "fixed"."""
    axis_study(tmp_path / "s", "io_mode", ("buffered", "direct"))
    summary = build_tables(tmp_path / "s").summary
    fixed = dict(fixed_settings(summary))
    assert {"io_mode", "io_mode_used", "cold_read_method", "nodes"}.isdisjoint(fixed)
    assert fixed["model"] == "gpt2-125m" and fixed["zero_stage"] == "1"
    collect(tmp_path / "s")
    md = (tmp_path / "s" / "report.md").read_text()
    line = md[md.index("Settings that do not vary:"):].splitlines()[0]
    named = {item.split(" ")[0] for item in line.removeprefix("Settings that do not vary: ").split(", ")}
    assert "model" in named and "ranks_per_node" in named
    assert {"io_mode", "io_mode_used", "cold_read_method", "nodes"}.isdisjoint(named), line


def _tiered(study: Path, replaced: int, gibps: float, tier_fstype: str, nodes: int = 2) -> None:
    for rep in range(3):
        p = make_point(nodes=nodes, rep=rep, strategy="tiered", tier="local", replaced_nodes=replaced, step_s=0.1)
        write_result(study, p, [1.0, 1.0], [gibps, gibps * 1.01], tier_fstype=tier_fstype)


def test_a_memory_tier_no_failure_restore_is_never_the_best_cold_read(tmp_path: Path) -> None:
    study = tmp_path / "t"
    _tiered(study, 0, 40.0, "tmpfs")  # every node reads its own memory tier: fast, and no failure's restore
    _tiered(study, 2, 3.0, "tmpfs")  # both nodes replaced: every byte from shared storage
    summary = build_tables(study).summary
    reads = summary[summary["phase"] == "read"].set_index("replaced_nodes")
    assert MEMORY_TIER in reads.loc[0, "flags"] and NO_FAILURE_RESTORE in reads.loc[0, "flags"]
    assert MEMORY_TIER not in reads.loc[2, "flags"] and NO_FAILURE_RESTORE not in reads.loc[2, "flags"]
    facts = dict(best_figures(summary))
    assert facts["best cold read (total bytes / total time)"].startswith("3.0")
    assert "replaced_nodes 2" in facts["best cold read (total bytes / total time)"]
    fastest = facts["fastest read, not cold (not a storage read: see flags)"]
    assert fastest.startswith("40.") and MEMORY_TIER in fastest and NO_FAILURE_RESTORE in fastest


def test_a_disk_tier_no_failure_restore_is_flagged_but_can_be_cold(tmp_path: Path) -> None:
    study = tmp_path / "t"
    _tiered(study, 0, 5.0, "xfs")
    flags = build_tables(study).summary.set_index("phase").loc["read", "flags"]
    assert NO_FAILURE_RESTORE in flags and MEMORY_TIER not in flags
    assert dict(best_figures(build_tables(study).summary))["best cold read (total bytes / total time)"]
