"""The reshard map: exact against an element-by-element oracle, agrees with DLIO's file sizes, reduces to the
same-shape restore, and refuses impossible restarts with the reason."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from studyctl.definition.checkpoint.layout import Parallelism, rank_files
from studyctl.definition.checkpoint.points import CheckpointOptions, replicated_kinds, restore_files
from studyctl.definition.checkpoint.reshard import (
    ReshardError,
    reshard_reads,
    reshard_split,
    restart_parallelism,
)
from studyctl.definition.checkpoint.reshard_counts import reshard_summary
from studyctl.definition.checkpoint.tensor_layout import replica_kinds
from studyctl.definition.inputs.catalog import ModelSpec, lookup
from tests.unit import reshard_oracle as oracle

# Dimensions that leave remainders (h 20 over 3 shards, vocab 33) and one with every optional tensor.
TINY = ModelSpec("tiny", num_layers=4, hidden_size=20, ffn_hidden_size=30, num_attention_heads=4, num_kv_heads=2,
                 vocab_size=33)
GPTISH = ModelSpec("gptish", num_layers=3, hidden_size=16, ffn_hidden_size=40, num_attention_heads=4,
                   num_kv_heads=4, vocab_size=30, mlp="plain", tied_embeddings=True, biases=True,
                   position_embeddings=8)

# (old TP, PP, DP), (new world, TP, PP) for every ZeRO stage each is valid under
PAIRS = [
    ((1, 1, 4), (2, None, None)),  # 4 → 2
    ((1, 1, 4), (8, None, None)),  # 4 → 8
    ((1, 1, 4), (3, None, None)),  # 4 → 3: pieces straddle files
    ((2, 1, 2), (4, 1, None)),  # TP 2 → 1
    ((2, 1, 2), (2, 1, None)),  # TP 2 → 1 and shrink
    ((1, 1, 4), (4, 2, None)),  # TP 1 → 2
    ((1, 2, 2), (4, None, 1)),  # PP 2 → 1 (per-layer files under ZeRO 1/2)
    ((1, 1, 4), (6, None, 3)),  # PP 1 → 3, DP 2
    ((2, 2, 1), (8, 4, 2)),  # TP 2 → 4 and PP kept at 2, DP 1 → 1
    ((1, 1, 3), (4, 2, None)),  # TP 1 → 2, DP 3 → 2
]
CASES = [(model, zero, old, new) for model in (TINY, GPTISH) for zero in (0, 1, 2, 3) for old, new in PAIRS
         if zero < 3 or (old[1] == 1 and (new[2] or 1) == 1)]


def _layouts(zero: int, old: tuple, new: tuple) -> tuple[Parallelism, Parallelism]:
    before = Parallelism(*old, zero)
    return before, restart_parallelism(before, new[0], new[1], new[2])


@pytest.mark.parametrize(("model", "zero", "old", "new"), CASES,
                         ids=[f"{c[0].name}-z{c[1]}-{c[2]}-to-{c[3]}" for c in CASES])
def test_map_equals_element_by_element_ownership(model: ModelSpec, zero: int, old: tuple, new: tuple) -> None:
    before, after = _layouts(zero, old, new)
    for rank in range(after.world_size):
        ranges = reshard_reads(model, before, after, rank)
        assert oracle.as_bytes(ranges) == oracle.needs(model, before, after, rank), (rank, ranges)
        names = [r.name for r in ranges]
        assert all(a.end < b.offset for a, b in itertools.pairwise(ranges) if a.name == b.name), "merged, in order"
        runs = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
        assert len(runs) == len(set(names)), "each file's ranges together"


@pytest.mark.parametrize("scale", [0.5, 0.07, 0.003])
@pytest.mark.parametrize("zero", [0, 1, 3])
def test_scaled_files_map_each_element_in_proportion(zero: int, scale: float) -> None:
    for old, new in [((1, 1, 4), (2, None, None)), ((2, 1, 2), (8, 1, None))]:
        before, after = _layouts(zero, old, new)
        for rank in range(after.world_size):
            assert oracle.as_bytes(reshard_reads(GPTISH, before, after, rank, scale)) == \
                oracle.needs(GPTISH, before, after, rank, scale), rank


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("model", [TINY, GPTISH], ids=lambda m: m.name)
def test_the_in_file_layout_fills_every_file_exactly(model: ModelSpec, zero: int) -> None:
    """The layout agrees with DLIO's sizes: each file holds exactly the elements the layout puts in it."""
    for tp, pp, dp in [(1, 1, 4), (2, 1, 2), (1, 2, 2), (2, 2, 2)]:
        if zero == 3 and pp > 1:
            continue
        par = Parallelism(tp, pp, dp, zero)
        contents = oracle.file_contents(model, par)
        for rank in range(par.world_size):
            for f in rank_files(model, par, rank):
                size = model.optimizer_bytes_per_param if f.kind == "optimizer" else model.model_bytes_per_param
                assert len(contents[f.name]) * size == f.nbytes, f.name


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("scale", [1.0, 0.3, 0.001])
def test_a_same_shape_restart_reads_what_restore_full_reads(zero: int, scale: float) -> None:
    model = lookup("llama_7b")
    for layout in [(1, 1, 4), (2, 1, 2)] + ([(1, 2, 2)] if zero < 3 else []):
        par = Parallelism(*layout, zero)
        opts = CheckpointOptions(restore="full", scale=scale)
        for rank in range(par.world_size):
            ranges = reshard_reads(model, par, par, rank, scale)
            whole = {f.name: f.nbytes for f in restore_files(model, par, rank, opts)}
            assert {r.name: (r.offset, r.length) for r in ranges} == {n: (0, b) for n, b in whole.items()}


@pytest.mark.parametrize("scale", [0.05, 0.0007])
def test_scaled_ranges_stay_inside_files_and_keep_their_share(scale: float) -> None:
    model, old = lookup("llama_7b"), Parallelism(1, 1, 4, 1)
    sizes = {f.name: f.nbytes for r in range(4) for f in rank_files(model, old, r, scale)}
    new = restart_parallelism(old, 8)
    full = sum(r.length for rank in range(8) for r in reshard_reads(model, old, new, rank))
    scaled = sum(r.length for rank in range(8) for r in reshard_reads(model, old, new, rank, scale))
    for rank in range(8):
        for r in reshard_reads(model, old, new, rank, scale):
            assert r.offset >= 0 and r.end <= sizes[r.name]
    assert scaled == pytest.approx(full * scale, rel=1e-3)


def test_broadcast_groups_share_exactly_the_replicated_bytes() -> None:
    model, old = TINY, Parallelism(1, 1, 4, 1)
    new = restart_parallelism(old, 4, tensor=2)
    splits = [reshard_split(model, old, new, rank) for rank in range(4)]
    assert [s[0] for s in splits] == [0, 1, 0, 1]
    assert splits[0][2] == splits[2][2] and splits[1][2] == splits[3][2] and splits[0][2] != splits[1][2]
    assert all(r.kind == "model" for s in splits for r in s[2]) and all(r.kind == "optimizer" for s in splits
                                                                          for r in s[1])


def test_summary_counts_storage_reads_and_broadcast_apart() -> None:
    model, old = lookup("llama_7b"), Parallelism(1, 1, 4, 1)
    new = restart_parallelism(old, 2)
    full = reshard_summary(model, old, new, restore="full")
    bcast = reshard_summary(model, old, new, restore="broadcast")
    weights = sum(f.nbytes for f in rank_files(model, old, 0) if f.kind == "model")
    assert full.total_bytes == bcast.total_bytes + bcast.broadcast_bytes
    assert bcast.broadcast_bytes == weights  # one receiver in the one group of two replicas
    assert full.files_opened_max == 3  # the weights and two of the four optimizer files (4 → 2)
    assert full.bytes_per_rank_max == max(sum(r.length for r in reshard_reads(model, old, new, k)) for k in (0, 1))


@pytest.mark.parametrize(("world", "tensor", "pipeline", "reason"), [
    (6, 4, None, "not a multiple of tensor_parallel×pipeline_parallel = 4×1 = 4"),
    (3, None, 2, "not a multiple"),
    (0, None, None, ">= 1"),
    (4, 0, None, ">= 1"),
    (6, 3, None, "does not divide num_attention_heads"),
    (8, None, 8, "exceeds num_layers"),
])
def test_impossible_restarts_name_the_reason(world: int, tensor: int | None, pipeline: int | None,
                                             reason: str) -> None:
    with pytest.raises(ReshardError, match=reason):
        restart_parallelism(Parallelism(1, 1, 4, 1), world, tensor, pipeline, model=TINY)


def test_zero3_with_pipeline_and_subset_checkpoints_are_refused() -> None:
    with pytest.raises(ReshardError, match="ZeRO-3 with pipeline_parallel"):
        restart_parallelism(Parallelism(1, 1, 4, 3), 4, pipeline=2, model=TINY)
    with pytest.raises(ReshardError, match="subset mode"):
        restart_parallelism(Parallelism(1, 1, 64, 1, running=8), 4)
    with pytest.raises(ReshardError, match="ZeRO stage is kept"):
        reshard_reads(TINY, Parallelism(1, 1, 4, 1), Parallelism(1, 1, 4, 2), 0)
    with pytest.raises(ReshardError, match="outside"):
        reshard_reads(TINY, Parallelism(1, 1, 4, 1), Parallelism(1, 1, 2, 1), 2)


@settings(max_examples=25, deadline=None)
@given(old=st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), st.integers(1, 3)),
       new=st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), st.integers(1, 3)),
       zero=st.integers(0, 3), data=st.data())
def test_any_valid_restart_matches_the_oracle(old: tuple, new: tuple, zero: int, data: st.DataObject) -> None:
    before, after = Parallelism(*old, zero), Parallelism(*new, zero)
    try:
        reshard_reads(TINY, before, after, 0)
    except ReshardError:
        assume(False)
    rank = data.draw(st.integers(0, after.world_size - 1))
    assert oracle.as_bytes(reshard_reads(TINY, before, after, rank)) == oracle.needs(TINY, before, after, rank)


@pytest.mark.parametrize("zero", [1, 3])
def test_deepspeed_names_change_only_the_names(zero: int) -> None:
    before = Parallelism(2, 1 if zero == 3 else 2, 2 if zero == 3 else 1, zero)
    after = restart_parallelism(before, 4, tensor=1, pipeline=1)
    renamed = {a.name: b.name for r in range(before.world_size) for a, b in
               zip(rank_files(GPTISH, before, r), rank_files(GPTISH, before, r, naming="deepspeed"), strict=True)}
    assert any(a != b for a, b in renamed.items())
    for rank in range(after.world_size):
        dlio = reshard_reads(GPTISH, before, after, rank)
        deepspeed = reshard_reads(GPTISH, before, after, rank, naming="deepspeed")
        assert [(renamed[r.name], r.offset, r.length) for r in dlio] == \
            [(r.name, r.offset, r.length) for r in deepspeed]


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_replica_kinds_derived_from_the_layout_are_the_points_replicated_kinds(zero: int) -> None:
    assert set(replica_kinds(GPTISH, zero)) == set(replicated_kinds(zero))
