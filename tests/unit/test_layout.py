"""The layout reproduces DLIO's size table exactly; invariants hold over many random layouts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studyctl.definition.checkpoint.layout import Parallelism, layout_problems, num_parameters, rank_files, summarize
from studyctl.definition.inputs.catalog import ModelSpec, lookup

GIB = 1 << 30

# docs/checkpoint-model.md, DLIO's sizes: (model, TP, PP, DP, ZeRO) → params (B), total GiB, 10^9 B, files, max/min GiB
TABLE = [
    ("llama_7b", 1, 1, 8, 1, 6.738, 87.86, 94.3, 9, 21.96, 9.41),
    ("llama_7b", 1, 1, 8, 3, 6.738, 87.86, 94.3, 16, 10.98, 10.98),
    ("llama3-8b", 1, 1, 8, 3, 8.030, 104.70, 112.4, 16, 13.09, 13.09),
    ("llama_70b", 8, 4, 2, 1, 69.883, 911.21, 978.4, 728, 16.39, 12.20),
    ("llama3-70b", 8, 1, 8, 3, 69.883, 911.21, 978.4, 128, 14.24, 14.24),
    ("llama3-405b", 8, 32, 2, 1, 405.853, 5292.25, 5682.5, 1544, 12.32, 8.86),
    ("llama3-1t", 8, 64, 2, 1, 1183.035, 15426.59, 16564.2, 2072, 17.97, 12.91),
]


@pytest.mark.parametrize("row", TABLE, ids=[f"{r[0]}-zero{r[4]}" for r in TABLE])
def test_dlio_size_table(row: tuple) -> None:
    name, tp, pp, dp, zero, params_b, gib, gb, files, max_gib, min_gib = row
    model = lookup(name)
    s = summarize(model, Parallelism(tp, pp, dp, zero))
    assert round(num_parameters(model) / 1e9, 3) == params_b
    assert round(s.total_bytes / GIB, 2) == gib
    assert round(s.total_bytes / 1e9, 1) == gb
    assert s.files_per_checkpoint == files
    assert round(s.bytes_per_rank_max / GIB, 2) == max_gib
    assert round(s.bytes_per_rank_min / GIB, 2) == min_gib


SMALL = ModelSpec("small", num_layers=4, hidden_size=512, ffn_hidden_size=1408, num_attention_heads=8,
                  num_kv_heads=2, vocab_size=8000)


def test_small_exact_case() -> None:
    assert num_parameters(SMALL) == 19_468_800
    zero3 = summarize(SMALL, Parallelism(1, 1, 2, 3))
    assert round(zero3.total_bytes / GIB, 6) == 0.253901
    assert zero3.files_per_checkpoint == 4
    zero0 = summarize(SMALL, Parallelism(1, 1, 2, 0))
    assert round(zero0.total_bytes / GIB, 6) == 0.253873
    assert zero0.files_per_checkpoint == 2 and zero0.writer_ranks == 1
    assert [f.name for f in rank_files(SMALL, Parallelism(1, 1, 2, 0), 1)] == []


def test_deepspeed_file_names() -> None:
    par = Parallelism(2, 2, 2, 1)
    names = [f.name for f in rank_files(SMALL, par, 0, naming="deepspeed")]
    assert names[0] == "layer_00-model_00-model_states.pt"
    assert names[-1] == "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    last_stage = [f.name for f in rank_files(SMALL, par, 3, naming="deepspeed")]  # tp 1, pp 1 (last stage): layers 3..6
    assert last_stage[:4] == [f"layer_{i:02d}-model_03-model_states.pt" for i in (3, 4, 5, 6)]
    assert [f.name for f in rank_files(SMALL, Parallelism(1, 1, 2, 3), 1, naming="deepspeed")] == [
        "zero_pp_rank_1_mp_rank_00_model_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]


def test_zero2_reports_bytes_written_not_dlio_overcount() -> None:
    par = Parallelism(1, 1, 4, 2)
    s = summarize(SMALL, par)
    assert s.total_bytes == sum(f.nbytes for r in range(4) for f in rank_files(SMALL, par, r))
    assert s.model_bytes == num_parameters(SMALL) * 2  # one copy of the weights: replica 0 writes them


def test_scale_shrinks_bytes_and_keeps_files() -> None:
    par = Parallelism(1, 2, 2, 1)
    full, tenth = summarize(SMALL, par), summarize(SMALL, par, 0.1)
    assert tenth.files_per_checkpoint == full.files_per_checkpoint
    assert tenth.total_bytes == pytest.approx(full.total_bytes * 0.1, rel=1e-3)


models = st.builds(
    lambda layers, heads, kv_div, head_dim, ffn_mult, vocab: ModelSpec(
        "m", layers, heads * head_dim, head_dim * heads * ffn_mult // 2, heads, max(1, heads // kv_div), vocab),
    st.integers(1, 24), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([1, 2, 4]), st.sampled_from([8, 16, 64]),
    st.integers(2, 8), st.integers(1, 5000),
)


@settings(max_examples=250, deadline=None)
@given(model=models, tp=st.sampled_from([1, 2, 4, 8]), pp=st.integers(1, 6), dp=st.integers(1, 6),
       zero=st.integers(0, 3), scale=st.sampled_from([1.0, 0.5, 0.01]))
def test_layout_invariants(model: ModelSpec, tp: int, pp: int, dp: int, zero: int, scale: float) -> None:
    problems = layout_problems(model, tp * pp * dp, tp, pp, zero)
    assert isinstance(problems, list)
    if problems:
        return
    par = Parallelism(tp, pp, dp, zero)
    per_rank = [rank_files(model, par, r, scale) for r in range(par.world_size)]
    s = summarize(model, par, scale)
    assert sum(f.nbytes for files in per_rank for f in files) == s.total_bytes
    assert sum(len(files) for files in per_rank) == s.files_per_checkpoint
    names = [f.name for files in per_rank for f in files]
    assert len(names) == len(set(names)), "file names collide"
    assert max(sum(f.nbytes for f in files) for files in per_rank) == s.bytes_per_rank_max
    assert min(sum(f.nbytes for f in files) for files in per_rank) == s.bytes_per_rank_min
    writers = {r for r, files in enumerate(per_rank) if files}
    model_writers = {r for r, files in enumerate(per_rank) if any(f.kind == "model" for f in files)}
    optim_writers = {r for r, files in enumerate(per_rank) if any(f.kind == "optimizer" for f in files)}
    mp = tp * pp
    if zero == 0:
        assert writers == model_writers == optim_writers == set(range(mp))
    elif zero in (1, 2):
        assert optim_writers == set(range(par.world_size))
        assert model_writers == set(range(mp))
    else:
        assert model_writers == optim_writers == set(range(par.world_size))
    assert s.writer_ranks == len(writers)
    if scale == 1.0 and zero < 3:  # every weight written exactly once (ZeRO-3 floors each shard)
        total_model = sum(f.nbytes for files in per_rank for f in files if f.kind == "model")
        assert total_model <= num_parameters(model) * 2 + 2 * model.hidden_size * (2 * model.num_layers + 1) * tp


@settings(max_examples=200, deadline=None)
@given(world=st.integers(1, 64), tp=st.integers(1, 16), pp=st.integers(1, 40), zero=st.integers(-1, 5),
       layers=st.integers(0, 8))
def test_invalid_layouts_give_reasons_never_raise(world: int, tp: int, pp: int, zero: int, layers: int) -> None:
    model = ModelSpec("m", layers, 64, 128, 8, 2, 100)
    problems = layout_problems(model, world, tp, pp, zero)
    valid = world % (tp * pp) == 0 and zero in (0, 1, 2, 3) and not (zero == 3 and pp > 1) and layers >= 1 \
        and pp <= layers and 8 % tp == 0
    assert (not problems) == valid, problems
    assert all(isinstance(p, str) and p for p in problems)


def test_dlio_names_are_unpadded_and_step_dirs_count_from_one() -> None:
    from studyctl.definition.checkpoint.layout import step_dir_name

    par = Parallelism(2, 2, 2, 1)
    names = [f.name for f in rank_files(SMALL, par, 3)]  # tp 1, pp 1: last stage, mp rank 3
    assert names[:4] == [f"layer_{i}-model_3_model_states.pt" for i in (3, 4, 5, 6)]
    assert names[-1] == "zero_pp_rank_0_mp_rank_3_optim_states.pt"
    assert rank_files(SMALL, Parallelism(2, 1, 2, 1), 1)[0].name == "model_1_model_states.pt"
    assert step_dir_name(0) == "global_epoch1_step1" and step_dir_name(0, "deepspeed") == "global_step0"


def test_naming_changes_names_never_sizes() -> None:
    par = Parallelism(2, 2, 2, 1)
    for rank in range(par.world_size):
        dlio = [f.nbytes for f in rank_files(SMALL, par, rank)]
        assert dlio == [f.nbytes for f in rank_files(SMALL, par, rank, naming="deepspeed")]


def test_subset_counts_only_the_running_ranks() -> None:
    full = Parallelism(2, 2, 2, 1)
    subset = Parallelism(2, 2, 2, 1, running=3)
    s = summarize(SMALL, subset)
    expected = sum(f.nbytes for r in range(3) for f in rank_files(SMALL, full, r))
    assert s.total_bytes == expected and s.writer_ranks == 3
    assert s.files_per_checkpoint == sum(len(rank_files(SMALL, full, r)) for r in range(3))
    assert layout_problems(SMALL, 3, 2, 2, 1, subset_of=8) == []
    assert "smaller than" in layout_problems(SMALL, 16, 2, 2, 1, subset_of=8)[0]
