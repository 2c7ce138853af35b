"""The named-limit rules (`analysis.limits`), pure: each limit is named on its own evidence and its 95% intervals,
in one order; where the intervals straddle a bound the verdict says the CIs do not allow one."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from studyctl.analysis.hardware.limits import (
    IMBALANCE_RATIO,
    METADATA_SHARE,
    RULES,
    STORAGE_BOUND,
    UNDECIDED,
    CellFacts,
    name_limit,
    rules_text,
)
from studyctl.analysis.hardware.rank_load import heaviest_rank
from tests.resultgen import layout_bytes, make_point

CEILING = 2.0
MIB = 1 << 20
NAN = float("nan")


def facts(ci: float = 0.05, **kw: object) -> CellFacts:
    """A cell at half its ceiling, even ranks, a little time in per-file calls: nothing explains it. Its figure,
    the ceiling and the shares carry 95% intervals of ±`ci` (NaN: none) unless `kw` sets them."""
    base = CellFacts(phase="write", GiBps=0.5 * CEILING, ceiling_GiBps=CEILING, even_ceiling_GiBps=CEILING,
                     io_mode_used="direct", bytes_max_over_mean=1.01, files=4, slowest_files=2,
                     bytes_per_file=256 * MIB, slowest_open_share=0.01, slowest_fsync_share=0.01,
                     slowest_close_share=0.01, n=3, ceiling_rounds=3, rank_checkpoints=3, world_size=2,
                     probe_bytes_per_rank=512 * MIB)
    cell = replace(base, **kw)  # type: ignore[arg-type]
    return with_ci(cell, ci, **{k: v for k, v in kw.items() if k.endswith(("_low", "_high"))})


def with_ci(c: CellFacts, ci: float, **given: object) -> CellFacts:
    """The intervals ±ci around the figures (the share's from both, as wide as the two together; the per-rank
    figures' over the cell's checkpoints)."""
    ceiling = c.ceiling_GiBps or NAN
    both = 2 * ci
    calls = c.slowest_open_share + c.slowest_close_share
    derived = {"GiBps_low": c.GiBps * (1 - ci), "GiBps_high": c.GiBps * (1 + ci),
               "ceiling_low": ceiling * (1 - ci), "ceiling_high": ceiling * (1 + ci),
               "share_low": c.share * (1 - both), "share_high": c.share * (1 + both),
               "even_share_low": c.even_share * (1 - both), "even_share_high": c.even_share * (1 + both),
               "heaviest_time_low": c.heaviest_time_over_mean * (1 - ci),
               "heaviest_time_high": c.heaviest_time_over_mean * (1 + ci),
               "calls_share_low": calls * (1 - ci), "calls_share_high": calls * (1 + ci),
               "calls_fsync_share_low": (calls + c.slowest_fsync_share) * (1 - ci),
               "calls_fsync_share_high": (calls + c.slowest_fsync_share) * (1 + ci)}
    return replace(c, **{**derived, **given})  # type: ignore[arg-type]


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


def test_imbalance_waits_for_its_intervals() -> None:
    """The third condition decides on the share of the even ceiling's interval: straddling it, no verdict."""
    cell = zero1_facts(4)
    wide = with_ci(cell, 0.4)
    v = name_limit(wide)
    assert v.limit == UNDECIDED and "imbalance" in v.evidence and "share of the even ceiling" in v.evidence


def test_the_heavy_files_come_from_the_layout() -> None:
    assert heaviest_rank(make_point(zero=3, rpn=4))["heavy_rank_files"] is None  # ZeRO-3: every rank alike
    zero0 = heaviest_rank(make_point(zero=0, rpn=4))["heavy_rank_files"]
    assert zero0 is not None and zero0.startswith("ZeRO-0 ") and "data-parallel rank 0" in zero0
    assert "optimizer" in zero0 and "model" in zero0  # replica 0 writes both; the others nothing


def test_imbalance_is_not_named_where_the_heavy_ranks_time_does_not_follow_its_bytes() -> None:
    """One shared device: the heavy rank finishes alone at nearly the device's rate; its extra bytes cost little."""
    cell = with_ci(replace(zero1_facts(4), heaviest_time_over_mean=1.1), 0.05)
    v = name_limit(cell)
    assert v.limit == "none" and "1.10× the mean time [1.04, 1.16]" in v.evidence


def test_time_follows_its_bytes_is_decided_on_its_interval() -> None:
    """The heavy rank's time ratio straddling 1 + 50% of its bytes' excess: no verdict, the interval named, and what
    would settle it (more checkpoints); one checkpoint: no CI, no verdict either."""
    cell = zero1_facts(4)
    bound = 1 + 0.5 * (cell.heaviest_bytes_over_movers - 1)
    straddling = with_ci(replace(cell, heaviest_time_over_mean=bound), 0.05)
    v = name_limit(straddling)
    assert v.limit == UNDECIDED and "imbalance: the heaviest rank's time " in v.evidence
    assert f"straddles {bound:.2f}×" in v.evidence and "over 3 checkpoints: more checkpoints" in v.evidence
    one = replace(cell, heaviest_time_low=NAN, heaviest_time_high=NAN, rank_checkpoints=1)
    assert name_limit(one).limit == UNDECIDED and "(no CI)" in name_limit(one).evidence
    unrecorded = replace(cell, heaviest_time_over_mean=NAN, heaviest_time_low=NAN, heaviest_time_high=NAN)
    assert name_limit(unrecorded).limit == "imbalance"  # no per-rank times: the condition does not speak


def test_imbalance_is_not_named_where_even_ranks_would_still_fall_short() -> None:
    v = name_limit(facts(GiBps=0.3 * CEILING, bytes_max_over_mean=1.43, heavy_rank_files="x"))
    assert v.limit != "imbalance"


def test_metadata_named_for_many_small_files() -> None:
    v = name_limit(facts(files=2072, slowest_files=1036, bytes_per_file=12 * 1024, io_mode_used="buffered",
                         slowest_open_share=0.12, slowest_fsync_share=0.22, slowest_close_share=0.04))
    assert v.limit == "metadata"
    assert "38% [36%, 40%] of the slowest rank's time in creating, fsyncing and closing its 1,036 files" in v.evidence
    assert "2,072 per checkpoint" in v.evidence


def test_a_large_buffered_files_fsync_is_its_data_not_metadata() -> None:
    """Buffered: the fsync of a big file is the data's flush; it counts as per-file cost only for small files."""
    big = facts(io_mode_used="buffered", bytes_per_file=512 * MIB, slowest_fsync_share=0.7)
    assert name_limit(big).limit == "none"
    assert name_limit(replace(big, bytes_per_file=1 * MIB)).limit == "metadata"
    assert name_limit(replace(big, io_mode_used="direct")).limit == "metadata"  # direct: fsync moves no data


def test_many_small_files_read_far_below_the_ceiling_get_a_cost_per_file() -> None:
    """55 small files read at 3-20% of the ceiling: the time beyond their bytes is a cost per file (opens, each
    request's latency), not "nothing measured explains the gap", though little of it shows as open and close."""
    for at in (0.03, 0.2):
        v = name_limit(facts(phase="read", GiBps=at * CEILING, files=55, slowest_files=28, bytes_per_file=300_000,
                             cold_read_method="direct"))
        assert v.limit == "per-file cost", v.sentence
        assert "its 55 files average 293.0 KiB" in v.evidence and "ms per file over the slowest rank's 28 files" \
            in v.evidence and "not transfer" in v.evidence
    big = facts(phase="read", GiBps=0.2 * CEILING, files=4, slowest_files=2, bytes_per_file=512 * MIB)
    assert name_limit(big).limit == "none"  # large files: no per-file cost to name


def test_page_cache_only_with_evidence() -> None:
    assert name_limit(facts(io_mode_used="buffered", fsync=False)).evidence == \
        "buffered write without fsync: in memory, not durable yet"
    warm = facts(phase="read", cold_read_method="none")
    assert name_limit(warm).limit == "page cache"  # no sample: a warm restore is served from memory
    assert name_limit(replace(warm, resident_pages_before=0, pages_sampled=16384)).limit != "page cache"
    resident = name_limit(facts(phase="read", cold_read_method="fadvise", resident_pages_before=4096,
                                pages_sampled=16384))
    assert resident.limit == "page cache" and "4,096 of 16,384 sampled pages (25.0%)" in resident.evidence
    above = facts(phase="read", GiBps=3 * CEILING, cold_read_method="fadvise", ceiling_method="fadvise")
    v = name_limit(above)
    assert v.limit == "page cache" and "beyond both CIs" in v.evidence and "no residency sample" in v.evidence


def test_a_restore_proven_cold_is_never_the_page_cache() -> None:
    """0 of the sampled pages resident: cold, however fast; above its ceiling, the probe fell short."""
    cold = facts(phase="read", GiBps=3 * CEILING, cold_read_method="fadvise", ceiling_method="fadvise",
                 resident_pages_before=0, pages_sampled=16384)
    v = name_limit(cold)
    assert v.limit == "storage" and "the probe did not reach this shape's ceiling" in v.evidence
    near = name_limit(facts(phase="read", GiBps=0.95 * CEILING, cold_read_method="fadvise", ceiling_method="fadvise",
                            resident_pages_before=0, pages_sampled=16384))
    assert near.limit == "storage" and "probe did not reach" not in near.evidence


def test_a_buffered_write_fsynced_in_its_timed_write_is_durable() -> None:
    """Never "not durable yet": above its own durable write probe beyond both CIs, the probe fell short."""
    v = name_limit(facts(io_mode_used="buffered", GiBps=1.6 * CEILING))
    assert v.limit == "storage" and "not durable" not in v.evidence
    assert "the probe did not reach this shape's ceiling: the cell at 1.60× its figure" in v.evidence
    assert "the probe writes and fsyncs one file of 512.0 MiB per rank (2 files)" in v.evidence
    assert "the checkpoint 4 files of 256.0 MiB on average; both buffered" in v.evidence


def test_a_direct_read_above_the_probe_is_never_the_page_cache() -> None:
    v = name_limit(facts(phase="read", GiBps=1.3 * CEILING, cold_read_method="direct", ceiling_method="direct"))
    assert v.limit == "storage" and "probe did not reach" in v.evidence and "both O_DIRECT" in v.evidence


def test_a_figure_above_its_ceiling_within_the_cis_is_not_told_the_probe_fell_short() -> None:
    v = name_limit(facts(GiBps=1.05 * CEILING, ci=0.1))
    assert "probe did not reach" not in v.evidence


def test_a_tiered_write_below_the_ceiling_is_its_two_writes() -> None:
    v = name_limit(facts(strategy="tiered", GiBps=0.4 * CEILING))
    assert v.limit == "tier and drain" and v.evidence.startswith("40% [36%, 44%] of")
    assert name_limit(facts(strategy="tiered", phase="read", GiBps=0.4 * CEILING)).limit != "tier and drain"
    unmeasured = name_limit(facts(strategy="tiered", ceiling_GiBps=None, even_ceiling_GiBps=None, ci=NAN))
    assert unmeasured.limit == "tier and drain" and "nan" not in unmeasured.evidence.lower()
    assert "no streaming ceiling measured" in unmeasured.evidence


def test_storage_named_only_where_the_shares_interval_lies_above_its_bound() -> None:
    v = name_limit(facts(GiBps=0.95 * CEILING, bytes_max_over_mean=1.4, slowest_open_share=0.5))
    assert v.sentence == "storage: 95% [86%, 104%] of this shape's streaming ceiling"
    assert name_limit(facts(GiBps=(STORAGE_BOUND - 0.1) * CEILING)).limit != "storage"
    straddles = name_limit(facts(GiBps=0.91 * CEILING, ci=0.1))
    assert straddles.limit == UNDECIDED
    assert straddles.evidence.startswith("the 95% CIs do not allow a verdict: storage: its share of the ceiling 91% "
                                         "[73%, 109%] straddles 85%")
    assert "more repetitions of the cell (n = 3, ±10%); more rounds of the ceiling probe (3 rounds, ×/÷ 1.11)" \
        in straddles.evidence


def test_no_rounds_no_ci_and_no_verdict_that_needs_one() -> None:
    ranks = {"calls_share_low": 0.01, "calls_share_high": 0.03, "calls_fsync_share_low": 0.02,
             "calls_fsync_share_high": 0.04}  # the cell's checkpoints give the per-rank figures theirs
    bare = facts(GiBps=0.95 * CEILING, ci=NAN, ceiling_rounds=1, **ranks)
    v = name_limit(bare)
    assert v.limit == UNDECIDED
    assert v.evidence.startswith("no CI for the ceiling (its result records fewer than two rounds): no verdict that "
                                 "needs one (storage could hold)")
    assert "no rounds" in v.evidence and "measure it again" in v.evidence
    assert name_limit(replace(bare, io_mode_used="buffered", fsync=False)).limit == "page cache"  # needs no CI
    one = name_limit(facts(GiBps=0.95 * CEILING, ci=NAN, n=1, **ranks))
    assert one.evidence.startswith("no CI for the cell (one repetition)")
    single = name_limit(facts(GiBps=0.95 * CEILING, ci=NAN, n=1))  # one checkpoint: no per-rank CI either
    assert single.evidence.startswith("no CI for the cell (one repetition): no verdict that needs one (storage or "
                                      "metadata could hold)")
    # a study with `ceilings: off`: no ceiling at all, so no rounds to ask for
    unmeasured = name_limit(facts(GiBps=0.95 * CEILING, ci=NAN, n=1, ceiling_GiBps=NAN, even_ceiling_GiBps=NAN))
    assert unmeasured.limit == UNDECIDED and "no ceiling measured for this shape: measure one" in unmeasured.evidence
    assert "rounds" not in unmeasured.evidence


def test_a_verdict_held_by_a_later_rule_waits_for_an_undecided_earlier_one() -> None:
    """Storage could hold (its interval straddles 85%) before the tiered write's rule: no verdict, both said."""
    v = name_limit(facts(strategy="tiered", GiBps=0.85 * CEILING, ci=0.1))
    assert v.limit == UNDECIDED and "; else tier and drain (" in v.evidence


def test_nothing_explains_the_gap_says_what_was_checked() -> None:
    v = name_limit(facts())
    assert v.limit == "none"
    assert v.evidence.startswith("nothing measured explains the gap: 50% [45%, 55%] of this shape's streaming "
                                 "ceiling")
    assert f"{1.01:.2f}× the mean bytes" in v.evidence
    assert name_limit(facts(ceiling_GiBps=None, even_ceiling_GiBps=None)).limit == "unknown"
    other = name_limit(facts(ceiling_GiBps=None, ceiling_note="no ceiling probe of this shape read as the restore "
                                                               "did"))
    assert other.sentence.startswith("unknown: no ceiling probe of this shape read as the restore did")


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
    just_below = facts(GiBps=0.8 * CEILING, bytes_max_over_mean=IMBALANCE_RATIO - 0.01, ci=0.01)
    assert name_limit(just_below).limit != "imbalance"
    assert name_limit(replace(just_below, bytes_max_over_mean=IMBALANCE_RATIO)).limit == "imbalance"
    share = METADATA_SHARE / 3
    meta = facts(slowest_open_share=share, slowest_fsync_share=share, slowest_close_share=share - 0.001, ci=0)
    assert name_limit(meta).limit != "metadata"
    assert name_limit(with_ci(replace(meta, slowest_close_share=share + 0.001), 0)).limit == "metadata"


def test_metadata_is_decided_on_the_interval_of_its_share() -> None:
    """Over the cell's checkpoints: the whole interval at or above 25% names it, one straddling 25% leaves no verdict
    (saying which interval, and that more checkpoints would settle it), one wholly below does not name it."""
    meta = facts(io_mode_used="buffered", bytes_per_file=1 * MIB, slowest_open_share=0.1, slowest_fsync_share=0.15,
                 slowest_close_share=0.05, ci=0.1)
    assert name_limit(meta).limit == "metadata" and name_limit(meta).evidence.startswith("30% [27%, 33%] of")
    assert name_limit(replace(meta, calls_fsync_share_low=0.25)).limit == "metadata"
    v = name_limit(replace(meta, calls_fsync_share_low=0.2, calls_fsync_share_high=0.35))
    assert v.limit == UNDECIDED
    assert ("metadata: the slowest rank's share of time in per-file calls 30% [20%, 35%] straddles 25% over 3 "
            "checkpoints: more checkpoints") in v.evidence
    below = name_limit(replace(meta, calls_fsync_share_low=0.1, calls_fsync_share_high=0.24))
    assert below.limit not in ("metadata", UNDECIDED)
    big = replace(meta, bytes_per_file=512 * MIB)  # a large buffered file's fsync is its data: open + close only
    assert name_limit(replace(big, calls_share_low=0.3, calls_share_high=0.4)).limit == "metadata"


def test_the_printed_rules_are_the_rule_objects_every_condition_included() -> None:
    text = rules_text()
    assert text[:len(RULES)] == [rule.text for rule in RULES] and text[len(RULES)].startswith("otherwise")
    for rule, line in zip(RULES, text, strict=False):
        assert line.startswith(f"{rule.limit}: ")
        assert all(cond.text in line for cond in rule.conditions)
    imbalance = next(line for line in text if line.startswith("imbalance:"))
    assert "its time follows its bytes" in imbalance  # the third condition, stated


def test_the_readme_prints_the_rules_of_the_code() -> None:
    """The README's list between its markers is `rules_text()`, line for line (regenerate: python -m
    studyctl.analysis.hardware.limit_rules)."""
    from studyctl.analysis.hardware.limit_rules import README_BEGIN, README_END, readme_block

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start, end = readme.index(README_BEGIN), readme.index(README_END)
    assert readme[start:end + len(README_END)] == readme_block()


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
    from studyctl.analysis.hardware.limits import FRAMEWORK_SHARE

    below = engine_facts(framework_share=FRAMEWORK_SHARE - 0.01, framework_share_low=0.1)
    assert name_limit(below).limit == "none"
    assert name_limit(replace(below, framework_share=FRAMEWORK_SHARE)).limit == "framework"
    noisy = engine_facts(framework_share_low=-0.05)  # the engine's interval and stream's overlap: no evidence
    assert name_limit(noisy).limit == "none"
    one_rep = engine_facts(framework_share_low=NAN, framework_share_high=NAN)
    assert name_limit(one_rep).sentence.startswith("framework: torch.save's serialization takes 44% of the time;")
    assert name_limit(replace(engine_facts(), engine="stream")).limit == "none"  # stream has no framework


def test_framework_from_the_storage_call_split_without_a_twin() -> None:
    v = name_limit(engine_facts(framework_share=0.6, framework_share_low=NAN, stream_GiBps=NAN,
                                framework_basis="outside the engine's storage calls"))
    assert v.sentence == ("framework: torch.save's serialization takes 60% of the time; the rest is inside its "
                          "storage calls (no stream cell on this shape)")


def test_framework_comes_before_storage_and_after_the_page_cache() -> None:
    """At 95% of the one-file stream probe, but stream on the same bytes is 1.8× faster: not storage-bound."""
    near = engine_facts(GiBps=0.95 * CEILING)
    assert name_limit(near).limit == "framework"
    assert name_limit(replace(near, framework_share=0.05, framework_share_low=-0.02)).limit == "storage"
    unflushed = engine_facts(io_mode_used="buffered", fsync=False)
    assert name_limit(unflushed).limit == "page cache"


def test_an_engine_cell_without_a_share_says_why() -> None:
    v = name_limit(facts(engine="dcp", framework_note="no stream cell on this shape and no time inside storage "
                                                      "calls recorded: the framework's share is not known"))
    assert v.limit == "none" and v.evidence.endswith("engine dcp: no stream cell on this shape and no time inside "
                                                     "storage calls recorded: the framework's share is not known")


def test_shares_interval_is_nan_free_where_both_cis_exist() -> None:
    c = facts()
    assert not math.isnan(c.share_low) and c.share_low < c.share < c.share_high
