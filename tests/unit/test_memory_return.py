"""The benchmarks' header line on how the kernel hands idle memory back to a host, read from sysfs trees laid out
as this VM's kernel lays them out (page_reporting's parameters, DAMON's admin tree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import page_reuse
from studyctl import host


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")


def test_reporting_and_a_running_pageout_scheme_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path / "reporting", {"page_reporting_order": "9", "min_free_ms": "0"})
    _tree(tmp_path / "balloons", {"virtio0/features": "0110010" + "0" * 57})  # this VM's: stats, deflate, reporting
    _tree(tmp_path / "damon", {"0/state": "on", "0/contexts/0/monitoring_attrs/intervals/aggr_us": "5000000",
                               "0/contexts/0/schemes/0/action": "pageout",
                               "0/contexts/0/schemes/0/access_pattern/age/min": "12",
                               "1/state": "off", "1/contexts/0/monitoring_attrs/intervals/aggr_us": "100000",
                               "1/contexts/0/schemes/0/action": "pageout",
                               "1/contexts/0/schemes/0/access_pattern/age/min": "5"})
    monkeypatch.setattr(host, "REPORTING", tmp_path / "reporting")
    monkeypatch.setattr(host, "BALLOONS", tmp_path / "balloons")
    monkeypatch.setattr(host, "DAMON", tmp_path / "damon")
    assert page_reuse.memory_return() == ("memory handed back to the host: free page reporting of 2 MiB blocks "
                                          "(min_free_ms 0); DAMON pageout of memory idle 60 s")


def test_a_kernel_without_either_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "REPORTING", tmp_path / "none")
    monkeypatch.setattr(host, "DAMON", tmp_path / "none")
    assert page_reuse.memory_return() == "memory handed back to the host: none the kernel shows"
    _tree(tmp_path / "reporting", {"page_reporting_order": "10"})  # mainline: no min_free_ms
    monkeypatch.setattr(host, "REPORTING", tmp_path / "reporting")
    monkeypatch.setattr(host, "BALLOONS", tmp_path / "balloons")
    assert page_reuse.memory_return() == "memory handed back to the host: none the kernel shows"  # compiled in only
    _tree(tmp_path / "balloons", {"virtio3/features": "0110000" + "0" * 57})  # a balloon that takes no reports
    assert page_reuse.memory_return() == "memory handed back to the host: none the kernel shows"
    _tree(tmp_path / "balloons", {"virtio4/features": "0000010"})
    assert page_reuse.memory_return() == "memory handed back to the host: free page reporting of 4 MiB blocks"


def test_the_report_names_a_host_that_hands_memory_back_and_only_then() -> None:
    from studyctl.analysis.report.context import provenance

    base = {"simulated_nodes": True, "started_at": "2026-11-28T05:00:00", "finished_at": "2026-11-28T05:01:00",
            "filesystem": "scratch", "mount_options": "rw"}
    rows, _ = provenance([{**base, "memory_return": "free page reporting of 2 MiB blocks (min_free_ms 0)"},
                          {**base, "memory_return": None}])
    said = dict(rows)
    [title] = [t for t in said if t.startswith("host memory handed back")]
    assert said[title] == ["free page reporting of 2 MiB blocks (min_free_ms 0)"] and "fresh memory" in title
    bare, _ = provenance([{**base, "memory_return": None}])
    assert not [t for t, _ in bare if t.startswith("host memory")]
