"""The named-limit rules (`analysis.limits`), pure: each limit is named on its own evidence, in one order."""

from __future__ import annotations

from dataclasses import replace

import pytest

from studyctl.analysis.limits import (
    IMBALANCE_RATIO,
    METADATA_SHARE,
    PAGE_CACHE_MARGIN,
    STORAGE_BOUND,
    CellFacts,
    name_limit,
)
from studyctl.analysis.rank_load import heaviest_rank
from tests.resultgen import layout_bytes, make_point

CEILING = 2.0
MIB = 1 << 20


def facts(**kw: object) -> CellFacts:
    """A cell at half its ceiling, even ranks, a little time in per-file calls: nothing explains it."""
    base = CellFacts(phase="write", GiBps=0.5 * CEILING, ceiling_GiBps=CEILING, even_ceiling_GiBps=CEILING,
                     io_mode_used="direct", bytes_max_over_mean=1.01, files=4, slowest_files=2,
                     bytes_per_file=256 * MIB, slowest_open_share=0.01, slowest_fsync_share=0.01,
                     slowest_close_share=0.01)
    return replace(base, **kw)  # type: ignore[arg-type]


def zero1_facts(ranks: int) -> CellFacts:
    """A ZeRO-1 point of several data-parallel ranks as the layout has it, at the bandwidth its imbalance allows."""
    point = make_point("gpt2-125m", zero=1, nodes=1, rpn=ranks, scale=0.1)
    per_rank = [b for b, _ in layout_bytes(point)]
    ratio = max(per_rank) / (sum(per_rank) / len(per_rank))
    # the slowest rank moves max bytes at the even ceiling's per-rank rate: the cell reaches ceiling / ratio
    return facts(GiBps=CEILING / ratio * 0.97, bytes_max_over_mean=ratio, heaviest_bytes_over_movers=ratio,
                 heaviest_time_over_mean=ratio, heavy_rank_files=heaviest_rank(point)["heavy_rank_files"])


@pytest.mark.parametrize("ranks", [3, 4, 8])
def test_imbalance_named_for_zero1_over_several_data_parallel_ranks(ranks: int) -> None:
    v = name_limit(zero1_facts(ranks))
    assert v.limit == "imbalance"
    assert "model states on data-parallel rank 0" in v.evidence  # from the layout rules, not a guess
    assert "the mean bytes" in v.evidence and "even ranks would reach" in v.evidence


def test_the_heavy_files_come_from_the_layout() -> None:
    assert heaviest_rank(make_point(zero=3, rpn=4))["heavy_rank_files"] is None  # ZeRO-3: every rank alike
    zero0 = heaviest_rank(make_point(zero=0, rpn=4))["heavy_rank_files"]
    assert zero0 is not None and zero0.startswith("ZeRO-0 ") and "data-parallel rank 0" in zero0
    assert "optimizer" in zero0 and "model" in zero0  # replica 0 writes both; the others nothing


def test_imbalance_is_not_named_where_the_heavy_ranks_time_does_not_follow_its_bytes() -> None:
    """One shared device: the heavy rank finishes alone at nearly the device's rate; its extra bytes cost little."""
    cell = replace(zero1_facts(4), heaviest_time_over_mean=1.1)
    v = name_limit(cell)
    assert v.limit == "none" and "1.10× the mean time" in v.evidence


def test_imbalance_is_not_named_where_even_ranks_would_still_fall_short() -> None:
    v = name_limit(facts(GiBps=0.3 * CEILING, bytes_max_over_mean=1.43, heavy_rank_files="x"))
    assert v.limit != "imbalance"


def test_metadata_named_for_many_small_files() -> None:
    v = name_limit(facts(files=2072, slowest_files=1036, bytes_per_file=12 * 1024, io_mode_used="buffered",
                         slowest_open_share=0.12, slowest_fsync_share=0.22, slowest_close_share=0.04))
    assert v.limit == "metadata"
    assert "38% of the slowest rank's time in creating, fsyncing and closing its 1,036 files" in v.evidence
    assert "2,072 per checkpoint" in v.evidence


def test_a_large_buffered_files_fsync_is_its_data_not_metadata() -> None:
    """Buffered: the fsync of a big file is the data's flush; it counts as per-file cost only for small files."""
    big = facts(io_mode_used="buffered", bytes_per_file=512 * MIB, slowest_fsync_share=0.7)
    assert name_limit(big).limit == "none"
    assert name_limit(replace(big, bytes_per_file=1 * MIB)).limit == "metadata"
    assert name_limit(replace(big, io_mode_used="direct")).limit == "metadata"  # direct: fsync moves no data


def test_page_cache_named_for_writes_not_durable_and_reads_not_cold() -> None:
    assert name_limit(facts(io_mode_used="buffered", fsync=False)).limit == "page cache"
    above = facts(io_mode_used="buffered", GiBps=(PAGE_CACHE_MARGIN + 0.3) * CEILING, direct_ceiling_GiBps=CEILING)
    v = name_limit(above)
    assert v.limit == "page cache" and "direct ceiling, not durable yet" in v.evidence
    assert name_limit(facts(phase="read", cold_read_method="none")).limit == "page cache"
    assert name_limit(facts(phase="read", GiBps=3 * CEILING, cold_read_method="fadvise")).limit == "page cache"


def test_a_direct_read_above_the_probe_is_never_the_page_cache() -> None:
    """O_DIRECT reads bypass the page cache: above the one-file probe they are still storage."""
    v = name_limit(facts(phase="read", GiBps=1.3 * CEILING, cold_read_method="direct"))
    assert v.limit == "storage" and "above the one-file-per-rank probe" in v.evidence


def test_a_tiered_write_below_the_ceiling_is_its_two_writes() -> None:
    v = name_limit(facts(strategy="tiered", GiBps=0.4 * CEILING))
    assert v.limit == "tier and drain" and v.evidence.startswith("40% of")
    assert name_limit(facts(strategy="tiered", phase="read", GiBps=0.4 * CEILING)).limit != "tier and drain"


def test_storage_named_at_the_ceiling_before_anything_else() -> None:
    v = name_limit(facts(GiBps=0.91 * CEILING, bytes_max_over_mean=1.4, slowest_open_share=0.5))
    assert v.sentence == "storage: 91% of this shape's streaming ceiling"
    assert name_limit(facts(GiBps=(STORAGE_BOUND - 0.05) * CEILING)).limit != "storage"


def test_nothing_explains_the_gap_says_what_was_checked() -> None:
    v = name_limit(facts())
    assert v.limit == "none"
    assert v.evidence.startswith("nothing measured explains the gap: 50% of this shape's streaming ceiling")
    assert f"{1.01:.2f}× the mean bytes" in v.evidence
    assert name_limit(facts(ceiling_GiBps=None, even_ceiling_GiBps=None)).limit == "unknown"


def test_network_named_for_a_broadcast_restore_at_mpis_bandwidth() -> None:
    cell = facts(phase="read", restore="broadcast", broadcast_GiBps=4.0, bcast_ceiling_GiBps=5.0,
                 broadcast_time_share=0.6)
    assert name_limit(cell).sentence == "network: broadcast at 80% of MPI bandwidth (60% of the restore's time)"
    assert name_limit(replace(cell, broadcast_GiBps=1.0)).limit == "none"


def test_memory_named_for_an_async_snapshot_at_the_memcpy_ceiling() -> None:
    cell = facts(strategy="async", snapshot_GiBps_per_rank=4.5, memcpy_ceiling_GiBps_per_rank=5.0)
    assert name_limit(cell).limit == "memory"
    assert name_limit(replace(cell, strategy="sync")).limit == "none"


def test_thresholds_hold_their_meaning() -> None:
    """The imbalance and metadata rules switch at their named thresholds, not elsewhere."""
    just_below = facts(GiBps=0.8 * CEILING, bytes_max_over_mean=IMBALANCE_RATIO - 0.01)
    assert name_limit(just_below).limit != "imbalance"
    assert name_limit(replace(just_below, bytes_max_over_mean=IMBALANCE_RATIO)).limit == "imbalance"
    share = METADATA_SHARE / 3
    meta = facts(slowest_open_share=share, slowest_fsync_share=share, slowest_close_share=share - 0.001)
    assert name_limit(meta).limit != "metadata"
    assert name_limit(replace(meta, slowest_close_share=share + 0.001)).limit == "metadata"


def test_the_report_states_every_rule_in_its_order() -> None:
    from studyctl.analysis.limits import RULES
    from studyctl.analysis.report.hardware import rules_text

    text = rules_text()
    assert len(text) == len(RULES) + 1 and text[-1].startswith("otherwise")
    assert [t.split(":")[0].replace(" ", "_") for t in text[:-1]] == [rule.__name__ for rule in RULES]


def engine_facts(**kw: object) -> CellFacts:
    """A torch_save write at half its ceiling whose stream twin on the same bytes is 1.8× faster."""
    twin: dict[str, object] = {"engine": "torch_save", "framework_share": 1 - 1 / 1.8, "framework_share_low": 0.40,
                               "framework_share_high": 0.48, "framework_basis": "stream on the same shape",
                               "stream_GiBps": 1.8 * CEILING / 2}
    return facts(**{**twin, **kw})


def test_framework_named_from_the_stream_twin_with_its_ci() -> None:
    v = name_limit(engine_facts())
    assert v.sentence == ("framework: torch.save's serialization takes 44% [40%, 48%] of the time; stream on the "
                          "same bytes reaches 1.80 GiB/s")
    gpu = name_limit(engine_facts(device="cuda", phase="read"))
    assert gpu.evidence.startswith("torch.load's deserialization and host-to-device copy take 44%")
    dcp = name_limit(engine_facts(engine="dcp", device="cuda"))
    assert dcp.evidence.startswith("DCP's planning, serialization and device-to-host copy take 44%")


def test_framework_needs_its_share_and_a_ci_above_zero() -> None:
    from studyctl.analysis.limits import FRAMEWORK_SHARE

    below = engine_facts(framework_share=FRAMEWORK_SHARE - 0.01, framework_share_low=0.1)
    assert name_limit(below).limit == "none"
    assert name_limit(replace(below, framework_share=FRAMEWORK_SHARE)).limit == "framework"
    noisy = engine_facts(framework_share_low=-0.05)  # the engine's interval and stream's overlap: no evidence
    assert name_limit(noisy).limit == "none"
    one_rep = engine_facts(framework_share_low=float("nan"), framework_share_high=float("nan"))
    assert name_limit(one_rep).sentence.startswith("framework: torch.save's serialization takes 44% of the time;")
    assert name_limit(replace(engine_facts(), engine="stream")).limit == "none"  # stream has no framework


def test_framework_from_the_storage_call_split_without_a_twin() -> None:
    v = name_limit(engine_facts(framework_share=0.6, framework_share_low=float("nan"), stream_GiBps=float("nan"),
                                framework_basis="outside the engine's storage calls"))
    assert v.sentence == ("framework: torch.save's serialization takes 60% of the time; the rest is inside its "
                          "storage calls (no stream cell on this shape)")


def test_framework_comes_before_storage_and_after_the_page_cache() -> None:
    """At 90% of the one-file stream probe, but stream on the same bytes is 1.8× faster: not storage-bound."""
    near = engine_facts(GiBps=0.9 * CEILING)
    assert name_limit(near).limit == "framework"
    assert name_limit(replace(near, framework_share=0.05, framework_share_low=-0.02)).limit == "storage"
    unflushed = engine_facts(io_mode_used="buffered", fsync=False)
    assert name_limit(unflushed).limit == "page cache"


def test_an_engine_cell_without_a_share_says_why() -> None:
    v = name_limit(facts(engine="dcp", framework_note="no stream cell on this shape and no time inside storage "
                                                      "calls recorded: the framework's share is not known"))
    assert v.limit == "none" and v.evidence.endswith("engine dcp: no stream cell on this shape and no time inside "
                                                     "storage calls recorded: the framework's share is not known")


def test_the_readme_names_every_rule_in_its_order() -> None:
    """The README's sentence "the first of these rules with its evidence: page cache (…), …" follows RULES."""
    import re
    from pathlib import Path

    from studyctl.analysis.limits import RULES

    text = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    start = text.index("the first of these rules with its evidence:")
    sentence = text[start:text.index("else \"nothing measured explains the gap\"", start)]
    named = [m.group(1).replace(" ", "_") for m in re.finditer(r"(?:: |\), |, )([a-z][a-z ]*?) \(", sentence)]
    assert named == [rule.__name__ for rule in RULES]
