"""Ceilings joined to cells by shape, shares, the per-rank split, the report section, the roofline plot, compare.

Generated results (tests/resultgen.py): bandwidths and ceilings are the test's own choices, so shares are known.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import pytest

from studyctl.analysis.collect import collect
from studyctl.analysis.compare import compare
from studyctl.analysis.hardware.table import cell_facts, rank_intervals
from studyctl.analysis.stats import describe
from studyctl.analysis.tables import HEADLINE, build_tables
from studyctl.definition.inputs.tdist import log_interval
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError
from tests.resultgen import make_point, write_ceiling, write_result

SPLIT = {"open": 0.05, "fsync": 0.1, "close": 0.02}


def study(root: Path, name: str = "s", factor: float = 1.0, ceilings: bool = True, nodes: tuple[int, ...] = (1, 2),
          peak: float | None = None) -> Path:
    """ZeRO-1 over 2 ranks per node, buffered, 3 repetitions; the ceiling at 2 GiB/s per node (write), 3 (read)."""
    path = root / name
    for n in nodes:
        point = make_point(zero=1, nodes=n, rpn=2, scale=0.1)
        for rep in range(3):
            bw = factor * n * (1 + 0.01 * rep)
            write_result(path, point.model_copy(update={"repetition": rep}), [bw, bw], [1.5 * bw, 1.5 * bw],
                         split=SPLIT, by_layout=True)
        if ceilings:
            write_ceiling(path, point, 2.0 * n, 3.0 * n)
    fs = {"path": "/tmp"} if peak is None else {"path": "/tmp", "peak_GiBps": peak}
    (path / "sweep.yaml").write_text(f"filesystems:\n  scratch: {fs}\n".replace("'", ""))
    return path


def test_ceilings_are_their_own_table_never_cells(tmp_path: Path) -> None:
    s = study(tmp_path)
    t = build_tables(s)
    assert len(t.ceilings) == 2
    ceiling_ids = set(t.ceilings["point_id"])
    for frame in (t.checkpoints, t.points, t.ranks, t.training):
        assert not ceiling_ids & set(frame["point_id"])
    assert not any(ceiling_ids & set(ids.split(",")) for ids in t.summary["point_ids"])
    assert set(t.summary["n"]) == {3}  # the ceiling point is no repetition of a cell
    res = collect(s)
    assert res.points == 6
    assert (s / "tables" / "ceilings.csv").is_file() and (s / "tables" / "ceilings.parquet").is_file()


def test_calibration_results_stay_out_of_cells(tmp_path: Path) -> None:
    s = study(tmp_path, ceilings=False, nodes=(1,))
    calib = make_point(zero=1, nodes=1, rpn=2, scale=0.1).model_copy(update={"role": "calibration"})
    write_result(s, calib, [9.0], [9.0])
    t = build_tables(s)
    assert calib.point_id not in set(t.points["point_id"]) and set(t.summary["n"]) == {3}


def test_share_of_the_shapes_ceiling_per_cell_and_phase(tmp_path: Path) -> None:
    t = build_tables(study(tmp_path, factor=1.5))
    for r in t.summary.to_dict("records"):
        assert r["shape"] == shape_of(make_point(zero=1, nodes=r["nodes"], rpn=2, scale=0.1)).key
        ceiling = (2.0 if r["phase"] == "write" else 3.0) * r["nodes"]
        assert r["ceiling_GiBps"] == pytest.approx(ceiling)
        assert r["ceiling_share"] == pytest.approx(r[HEADLINE] / ceiling)
        assert r["limit"] and r["limit_evidence"]


def test_no_ceiling_no_share_and_the_limit_says_so(tmp_path: Path) -> None:
    t = build_tables(study(tmp_path, ceilings=False))
    assert t.summary["ceiling_share"].isna().all() and set(t.summary["limit"]) == {"unknown"}
    assert t.ceilings.empty
    off = study(tmp_path, "off", ceilings=False)
    with (off / "sweep.yaml").open("a") as f:
        f.write("ceilings: off\n")
    out = collect(off)  # `ceilings: off`: one line says so, no empty section
    assert [line for line in out.summary_lines() if line.startswith("hardware: ")] == [
        "hardware: no ceilings measured: the sweep's `ceilings: off` adds no ceiling point: shares and limits need "
        "them"]
    assert "How close to the hardware" not in (out.report_md or Path()).read_text()


def test_per_rank_split_and_bytes_per_rank_in_the_summary(tmp_path: Path) -> None:
    t = build_tables(study(tmp_path))
    s = t.summary
    for part, share in SPLIT.items():
        assert s[f"slowest_{part}_share"].tolist() == pytest.approx([share] * len(s))
        assert s[f"mean_{part}_share"].tolist() == pytest.approx([share] * len(s))
    assert (s["bytes_per_rank_max"] > s["bytes_per_rank_mean"]).all()  # ZeRO-1: replica 0 writes the weights
    ratio = s["bytes_per_rank_max"] / s["bytes_per_rank_mean"]
    assert s["bytes_max_over_mean"].tolist() == pytest.approx(ratio.tolist())
    assert set(s["heavy_rank_files"]) == {"ZeRO-1 model states on data-parallel rank 0"}
    assert {"open_s", "transfer_s", "fsync_s", "close_s", "other_s", "files"} <= set(t.ranks.columns)
    # every checkpoint splits alike here: the per-file calls' intervals have no width, over 3 repetitions × 2
    assert s["calls_share_low"].tolist() == pytest.approx([0.07] * len(s))
    assert s["calls_fsync_share_high"].tolist() == pytest.approx([0.17] * len(s))
    assert set(s["rank_checkpoints"]) == {6} and s["heaviest_time_low"].notna().all()


def test_per_rank_intervals_over_the_cells_checkpoints() -> None:
    """The time ratio's interval is Student t over its logarithms, the calls' share's over the shares as they are
    (held to [0, 1]); one checkpoint has none."""
    keys = ["cell_key", "phase"]
    slowest = pd.DataFrame({"cell_key": ["a", "a", "a", "b"], "phase": "write", "open_share": [0.1, 0.3, 0.2, 0.1],
                            "close_share": [0.0, 0.1, 0.0, 0.0], "fsync_share": [0.5, 0.1, 0.3, 0.2]})
    heaviest = pd.DataFrame({"cell_key": ["a", "a", "a", "b"], "phase": "write",
                             "heaviest_time_over_mean": [1.2, 1.5, 1.8, 1.3]})
    got = rank_intervals(slowest, heaviest, keys)
    a, b = got.loc[("a", "write")], got.loc[("b", "write")]
    _, low, high, _ = log_interval([1.2, 1.5, 1.8])
    assert (a["heaviest_time_low"], a["heaviest_time_high"]) == pytest.approx((low, high))
    calls = describe([0.1, 0.4, 0.2])
    assert a["calls_share_low"] == 0.0 and a["calls_share_high"] == pytest.approx(calls["ci95_high"])  # held at 0
    fsync = describe([0.6, 0.5, 0.5])
    assert (a["calls_fsync_share_low"], a["calls_fsync_share_high"]) == pytest.approx(
        (fsync["ci95_low"], min(fsync["ci95_high"], 1.0)))
    assert a["rank_checkpoints"] == 3 and b["rank_checkpoints"] == 1
    assert b[["heaviest_time_low", "calls_share_low", "calls_fsync_share_high"]].isna().all()


def test_stated_peak_gives_a_share(tmp_path: Path) -> None:
    s = study(tmp_path, peak=8.0)
    t = build_tables(s)
    assert t.summary["peak_share"].tolist() == pytest.approx((t.summary[HEADLINE] / 8.0).tolist())
    collect(s)
    assert "% of stated peak" in (s / "report.md").read_text()
    assert "% of stated peak" not in (collect(study(tmp_path, "nopeak"), force=True).report_md or Path()).read_text()


@pytest.mark.parametrize("value", ["-1", "fast", ".nan", "0"])
def test_a_bad_stated_peak_is_one_line_exit_2(tmp_path: Path, value: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(f"""\
        study: t1
        models: [llama_7b]
        matrix:
          nodes: [1]
        filesystems:
          scratch: {{path: /tmp/x, peak_GiBps: {value}}}
        """))
    with pytest.raises(UserError) as info:
        load_sweep(path)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    assert "filesystems.scratch.peak_GiBps" in str(info.value)


def test_report_and_collect_name_a_limit_per_cell(tmp_path: Path) -> None:
    s = study(tmp_path, factor=0.6)
    res = collect(s)
    md = (s / "report.md").read_text()
    section = md[md.index("## How close to the hardware"):]
    summary = build_tables(s).summary
    for r in summary.to_dict("records"):
        assert f"**{r['limit']}**" in section
    assert "Measured ceilings per shape" in section
    html = (s / "report.html").read_text()
    assert 'id="hardware"' in html
    hardware = [line for line in res.summary_lines() if line.startswith("hardware: ")]
    assert len(hardware) == 1 + len(summary)  # the ceilings, then one line per cell × phase
    assert all("of the ceiling" in line for line in hardware[1:])


def test_roofline_plot_per_filesystem_and_skipped_without_ceilings(tmp_path: Path) -> None:
    res = collect(study(tmp_path))
    roof = [p for p in res.plots if p.kind == "roofline"]
    assert len(roof) == 1 and roof[0].path.name == "roofline_scratch.png" and roof[0].path.stat().st_size > 10_000
    bare = collect(study(tmp_path, "bare", ceilings=False))
    assert not [p for p in bare.plots if p.kind == "roofline"]
    assert not [s for s in bare.skipped_plots if "roofline" in s]  # `ceilings: off`: nothing to explain
    mixed = study(tmp_path, "mixed")
    write_result(mixed, make_point(zero=1, nodes=1, rpn=2, scale=0.1, fs="other"), [1.0], [1.0])
    out = collect(mixed)
    assert [p.path.name for p in out.plots if p.kind == "roofline"] == ["roofline_scratch.png"]
    assert any(s.startswith("roofline for other: no ceiling measured") for s in out.skipped_plots)
    with_peak = collect(study(tmp_path, "peak", ceilings=False, peak=4.0))
    assert [p for p in with_peak.plots if p.kind == "roofline"]


def test_compare_carries_the_share_of_the_hardware(tmp_path: Path) -> None:
    a, b = study(tmp_path, "a", factor=0.6), study(tmp_path, "b", factor=1.8)
    res = compare(a, b)
    assert {"ceiling_share_a", "ceiling_share_b", "limit_a", "limit_b"} <= set(res.matched.columns)
    m = res.matched
    moved = m["ceiling_share_b"] / m["ceiling_share_a"]
    assert moved.tolist() == pytest.approx((m["GiBps_b"] / m["GiBps_a"]).tolist())  # same hardware: share ∝ GiB/s
    lines = [line for line in res.summary_lines() if " → " in line and "GiB/s" in line]
    assert lines and all("of the hardware" in line for line in lines)
    first = m.iloc[0]
    assert {"ceiling_share_low_a", "ceiling_share_high_b"} <= set(m.columns)
    assert (f"{first['ceiling_share_a']:.0%} [{first['ceiling_share_low_a']:.0%}, "
            f"{first['ceiling_share_high_a']:.0%}] → {first['ceiling_share_b']:.0%} [") in "\n".join(lines)


def test_compare_with_a_study_without_ceilings_still_works(tmp_path: Path) -> None:
    res = compare(study(tmp_path, "a", ceilings=False), study(tmp_path, "b"))
    assert not res.matched.empty and res.matched["ceiling_share_a"].isna().all()
    assert pd.notna(res.matched["ceiling_share_b"]).all()


def like_study(root: Path, resident: tuple[int, int] | None, read_factor: float = 0.9) -> Path:
    """Buffered and O_DIRECT cells of one node: the buffered shape's probe reads cold through the page cache
    (fadvise) at 3 GiB/s, the direct one's at 1; the buffered restores run at `read_factor` of their own probe,
    far above the direct one (readahead); every probe's rounds ±3%."""
    path = root / "like"
    for io_mode, read in (("buffered", 3.0), ("direct", 1.0)):
        point = make_point(zero=3, nodes=1, rpn=2, scale=0.1, io_mode=io_mode)
        for rep in range(3):
            bw = 1.0 + 0.01 * rep
            rd = read_factor * read * (1 + 0.01 * rep)
            write_result(path, point.model_copy(update={"repetition": rep}), [bw, bw], [rd, rd], split=SPLIT,
                         resident=resident if io_mode == "buffered" else None)
        write_ceiling(path, point, 1.0, read, round_spread=0.03)
    (path / "sweep.yaml").write_text("filesystems:\n  scratch: {path: /tmp}\n")
    return path


def test_a_buffered_restore_is_judged_against_the_buffered_cold_probe(tmp_path: Path) -> None:
    """At 90% of its own cold buffered probe and 2.7× the O_DIRECT one, proven cold (0 of 16,384 pages): storage
    or no verdict, never page cache."""
    t = build_tables(like_study(tmp_path, resident=(0, 16384)))
    reads = t.summary[t.summary["phase"] == "read"].set_index("io_mode")
    buffered = reads.loc["buffered"]
    assert buffered["ceiling_GiBps"] == pytest.approx(3.0) and buffered["ceiling_method"] == "fadvise"
    assert buffered["limit"] != "page cache", buffered["limit_evidence"]
    assert buffered["resident_pages_before"] == 0 and buffered["pages_sampled"] == 16384 * 2 * 3
    assert buffered["ceiling_share_low"] < buffered["ceiling_share"] < buffered["ceiling_share_high"]
    assert reads.loc["direct", "ceiling_method"] == "direct"


def test_resident_pages_before_the_read_name_the_page_cache(tmp_path: Path) -> None:
    t = build_tables(like_study(tmp_path, resident=(8192, 16384)))
    buffered = t.summary[(t.summary["phase"] == "read") & (t.summary["io_mode"] == "buffered")].iloc[0]
    assert buffered["limit"] == "page cache"
    assert "49,152 of 98,304 sampled pages (50.0%)" in buffered["limit_evidence"]


def test_a_cold_restore_above_its_probe_beyond_both_cis_says_the_probe_fell_short(tmp_path: Path) -> None:
    t = build_tables(like_study(tmp_path, resident=(0, 16384), read_factor=1.6))
    buffered = t.summary[(t.summary["phase"] == "read") & (t.summary["io_mode"] == "buffered")].iloc[0]
    assert buffered["limit"] == "storage"
    assert "the probe did not reach this shape's ceiling" in buffered["limit_evidence"]
    assert "the probe reads back one file of" in buffered["limit_evidence"]


def test_the_ceilings_table_carries_each_rates_interval_and_rounds(tmp_path: Path) -> None:
    t = build_tables(like_study(tmp_path, resident=None))
    c = t.ceilings.set_index("io_mode")
    assert c.loc["buffered", "storage_read_GiBps_rounds"] == 3
    assert c.loc["buffered", "storage_read_GiBps_low"] < 3.0 < c.loc["buffered", "storage_read_GiBps_high"]
    assert '"storage_read_GiBps": [2.91, 3.0, 3.09]' in c.loc["buffered", "rounds"]
    assert c.loc["buffered", "cold_read_method"] == "fadvise"


def test_a_ceiling_without_rounds_takes_its_probes_checkpoints_and_none_beyond(tmp_path: Path) -> None:
    """Older results: the largest-shard probe's checkpoints are its rounds; the memory copy's have none."""
    t = build_tables(study(tmp_path, nodes=(1,)))
    row = t.ceilings.iloc[0]
    assert row["storage_write_GiBps_rounds"] == 3 and row["memcpy_GiBps_per_rank_rounds"] == 0
    assert pd.isna(row["memcpy_GiBps_per_rank_low"])


def test_report_shows_the_intervals_of_cells_ceilings_and_shares(tmp_path: Path) -> None:
    s = like_study(tmp_path, resident=(0, 16384))
    collect(s)
    md = (s / "report.md").read_text()
    section = md[md.index("## How close to the hardware"):]
    assert "share of ceiling [95% CI]" in section and "| rounds | read |" in section
    assert "| 3.00 \\[2.78, 3.23\\] |" in section  # the buffered probe's read with its interval (Markdown-escaped)
    assert "its time follows its bytes" in section  # the printed rules are the rule objects'
    assert "**undecided**" in section or "**storage**" in section


def test_a_memory_filesystem_read_is_not_page_cache_by_its_residency() -> None:
    """On tmpfs every page of a file is resident by construction: the sample is no evidence of a warm read, on the
    filesystem itself or on a tiered cell's memory tier; on a disk the same sample is."""
    row = {"phase": "read", "strategy": "sync", "fstype": "ext4", "resident_pages_before": 12288,
           "pages_sampled": 12288, "io_mode": "buffered", "cold_read_method": "fadvise"}
    assert cell_facts(row, {}, {}).sampled
    assert not cell_facts({**row, "fstype": "tmpfs"}, {}, {}).sampled
    assert not cell_facts({**row, "strategy": "tiered", "tier_fstype": "tmpfs"}, {}, {}).sampled
    assert cell_facts({**row, "strategy": "sync", "tier_fstype": "tmpfs"}, {}, {}).sampled
