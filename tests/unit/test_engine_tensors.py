"""The tensors of each checkpoint file: they fill the layout's files exactly, follow its pieces, and read the
state convention (dtypes, optimizer groups) off the file sizes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studyctl.definition.checkpoint.engine_tensors import (
    GROUP_NAMES,
    PAD_DTYPE,
    UnknownLayout,
    file_tensors,
    read_tensors,
)
from studyctl.definition.checkpoint.layout import (
    CheckpointFile,
    Convention,
    Parallelism,
    file_elements,
    layout_problems,
    num_parameters,
    rank_files,
    replica_files,
    replicated_kinds,
)
from studyctl.definition.checkpoint.model_tensors import layer_tensors, stage_layers
from studyctl.definition.inputs.catalog import CATALOG, ModelSpec
from tests.unit.test_layout import SMALL, models


@settings(max_examples=200, deadline=None)
@given(model=models, tp=st.sampled_from([1, 2, 4]), pp=st.integers(1, 4), dp=st.integers(1, 4),
       zero=st.integers(0, 3), scale=st.sampled_from([1.0, 0.5, 0.013, 0.001]))
def test_tensors_fill_every_file_exactly(model: ModelSpec, tp: int, pp: int, dp: int, zero: int, scale: float) -> None:
    if layout_problems(model, tp * pp * dp, tp, pp, zero):
        return
    par = Parallelism(tp, pp, dp, zero)
    names: list[str] = []
    for rank in range(par.world_size):
        planned = file_tensors(model, par, rank, scale)
        assert [p.file for p in planned] == rank_files(model, par, rank, scale)
        for p in planned:
            assert p.nbytes == p.file.nbytes
            assert all(t.numel > 0 for t in p.tensors)
            assert all(t.name.startswith(p.file.name + "/") for t in p.tensors)
            assert sum(t.dtype == PAD_DTYPE for t in p.tensors) <= (0 if scale == 1.0 else 1)
            names += [t.name for t in p.tensors]
    assert len(names) == len(set(names)), "a tensor name repeats across ranks: DCP would deduplicate it"


@pytest.mark.parametrize(("tp", "pp", "zero"), [(1, 1, 0), (1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 2, 1), (1, 1, 3)])
def test_model_files_hold_every_stage_tensor_piece(tp: int, pp: int, zero: int) -> None:
    """At full scale a model file holds one tensor per (layer, tensor) of its layers, in DLIO's order, and over
    the writers with TP 1 (whole tensors, no ZeRO-3 floor) the pieces add up to every parameter once."""
    m, dp = CATALOG["gpt2-125m"], 2
    par = Parallelism(tp, pp, dp, zero)
    elements = 0
    for rank in range(par.world_size):
        stage = par.coords(rank)[1]
        models = [p for p in file_tensors(m, par, rank) if p.file.kind == "model"]
        layers = [i for i in stage_layers(m.num_layers, pp, stage) if layer_tensors(m, i)]
        assert sum(len(p.tensors) for p in models) == (sum(len(layer_tensors(m, i)) for i in layers) if models else 0)
        if models:
            assert [t.name.split("/")[1] for p in models for t in p.tensors] == [
                f"layers.{i}.{j}" for i in layers for j in range(len(layer_tensors(m, i)))]
            assert {t.dtype for p in models for t in p.tensors} == {m.model_dtype}
        elements += sum(t.numel for p in models for t in p.tensors)
    if tp == 1 and zero < 3:
        assert elements == num_parameters(m)


def test_optimizer_file_holds_three_groups_of_partition_and_small() -> None:
    m, par = SMALL, Parallelism(1, 1, 4, 1)
    (optim,) = [p for p in file_tensors(m, par, 1) if p.file.kind == "optimizer"]
    n = num_parameters(m) // 4
    assert [(t.name.split("/")[1], t.dtype, t.numel) for t in optim.tensors] == [
        (f"{g}.{what}", "fp32", e) for g in GROUP_NAMES[3] for what, e in (("partition", n), ("small", 5 * 512))]


def test_scaled_tensors_shrink_in_proportion_and_the_last_takes_the_rounding() -> None:
    m, par, scale = CATALOG["gpt2-125m"], Parallelism(1, 1, 2, 1), 0.0013
    full, scaled = file_tensors(m, par, 0), file_tensors(m, par, 0, scale)
    for f, s in zip(full, scaled, strict=True):
        whole = {t.name: t.numel for t in f.tensors}
        body = [t for t in s.tensors if t.dtype != PAD_DTYPE]
        assert [t.name for t in body[:-1]] == [n for n, e in list(whole.items())[:-1]
                                               if e * s.file.nbytes // f.file.nbytes]
        for part in body[:-1]:
            assert part.numel == whole[part.name] * s.file.nbytes // f.file.nbytes
        assert body[-1].name == f.tensors[-1].name
        assert body[-1].numel >= whole[body[-1].name] * s.file.nbytes // f.file.nbytes
        assert s.nbytes == s.file.nbytes


def test_a_torch_state_holds_fp32_weights_and_two_groups() -> None:
    """PyTorch's AMP/FSDP2 state (fp32 weights, Adam m and v: 12 B/param), its files twice the weights' and two
    thirds of the optimizer's bytes of the megatron state's; the optimizer's state per parameter tensor (rank 0
    of 2 under ZeRO 1 holds the first half of the flat vector: the tensors it reaches, the last one cut), then
    torch.optim's 0-dim fp32 `step` for every parameter tensor of its stage (all 27: it holds a shard of each)."""
    m, par = SMALL, Parallelism(1, 1, 2, 1)
    megatron = rank_files(m, par, 0)
    every = [f"layers.{i}.{j}" for i in range(m.num_layers + 3) for j in range(len(layer_tensors(m, i)))]
    assert len(every) == 27
    torch_files = [replace(f, nbytes=f.nbytes * 2 if f.kind == "model" else f.nbytes * 2 // 3 + 4 * 27)
                   for f in megatron]
    assert torch_files == rank_files(m, par, 0, conv=Convention("torch"))
    planned = file_tensors(m, par, 0, conv=Convention("torch"))
    model, optim = planned
    assert {t.dtype for t in model.tensors} == {"fp32"} and model.nbytes == torch_files[0].nbytes
    half, element, params = num_parameters(m) // 2, 0, []
    for i in range(m.num_layers + 3):
        for j, (n, _) in enumerate(layer_tensors(m, i)):
            if element < half:
                params.append((f"layers.{i}.{j}", min(n, half - element)))
            element += n
    assert [(t.name.split("/")[1], t.numel) for t in optim.tensors] == [
        spec for g in GROUP_NAMES[2] for spec in [*((f"{p}.{g}", n) for p, n in params), (f"{g}.small", 5 * 512)]
    ] + [(f"{p}.step", 1) for p in every]
    steps = optim.tensors[-27:]
    assert all(t.scalar and t.shape == () and t.dtype == "fp32" for t in steps)
    assert not any(t.scalar for t in optim.tensors[:-27])


@pytest.mark.parametrize(("tp", "pp", "dp", "zero"), [(2, 2, 2, 0), (1, 3, 2, 1), (1, 1, 3, 3), (2, 1, 2, 2)])
def test_a_torch_optimizer_holds_a_step_per_parameter_of_its_stage_at_any_scale(tp: int, pp: int, dp: int,
                                                                                zero: int) -> None:
    """Every optimizer file a rank writes holds one step for each parameter tensor of its pipeline stage, under
    every ZeRO stage and TP rank, and the same steps at scale 0.01 (a smaller run has as many parameters)."""
    m, par, conv = SMALL, Parallelism(tp, pp, dp, zero), Convention("torch")
    for rank in range(par.world_size):
        stage = par.coords(rank)[1]
        want = [f"layers.{i}.{j}.step" for i in stage_layers(m.num_layers, pp, stage)
                for j in range(len(layer_tensors(m, i)))]
        for scale in (1.0, 0.01):
            optims = [p for p in file_tensors(m, par, rank, scale, conv=conv) if p.file.kind == "optimizer"]
            for p in optims:
                assert [t.name.split("/")[1] for t in p.tensors if t.scalar] == want
            moments = [f.nbytes * 2 // 3 for f in rank_files(m, par, rank) if f.kind == "optimizer"]
            assert [p.file.nbytes for p in optims] == [
                (x if scale == 1.0 else int(x * scale)) + 4 * len(want) for x in moments]


@pytest.mark.parametrize(("kind", "factor"), [("model", 3), ("optimizer", 4)])
def test_a_file_no_convention_explains_is_refused(kind: str, factor: int) -> None:
    m, par = SMALL, Parallelism(1, 1, 2, 1)
    odd = [CheckpointFile(f.name, f.nbytes * factor, f.kind) if f.kind == kind else f for f in rank_files(m, par, 0)]
    with pytest.raises(UnknownLayout, match=odd[0 if kind == "model" else 1].name):
        file_tensors(m, par, 0, files=odd, nominal=odd)


@pytest.mark.parametrize(("zero", "state"), [(0, "megatron"), (1, "torch"), (2, "megatron")])
def test_spread_pieces_are_flat_runs_of_their_files(zero: int, state: str) -> None:
    """Under replicated_writer spread every DP rank's piece of a shared file is one flat tensor of its elements
    (and the bytes short of one as uint8); the rest keep their layout, and names stay unique over the ranks."""
    m, par = CATALOG["gpt2-125m"], Parallelism(1, 1, 3, zero)
    conv = Convention(state, "spread")  # type: ignore[arg-type]
    kinds = replicated_kinds(zero)
    names: list[str] = []
    for rank in range(par.world_size):
        planned = file_tensors(m, par, rank, 0.01, conv=conv)
        assert [p.file for p in planned] == rank_files(m, par, rank, 0.01, conv=conv)
        for p in planned:
            assert p.nbytes == p.file.nbytes
            if p.file.kind in kinds:
                dtype, elements, tail = file_elements(m, conv, p.file)
                assert [(t.name.split("/")[1], t.dtype, t.numel) for t in p.tensors] == [
                    ("flat", dtype, elements), *([("pad", PAD_DTYPE, tail)] if tail else [])]
            names += [t.name for t in p.tensors]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("state", ["megatron", "torch"])
def test_a_spread_piece_scaled_to_nothing_is_left_out(state: str) -> None:
    """A tiny model at a small scale leaves some DP ranks a 0-byte piece, which they do not write: their other
    files still get their tensors (paired with their nominal sizes by name, not by position)."""
    m, par, conv = ModelSpec("m", 2, 8, 8, 1, 1, 1), Parallelism(1, 2, 2, 1), Convention(state, "spread")  # type: ignore[arg-type]
    left_out = 0
    for rank in range(par.world_size):
        files = rank_files(m, par, rank, 0.013, conv=conv)
        left_out += len(rank_files(m, par, rank, conv=conv)) - len(files)
        planned = file_tensors(m, par, rank, 0.013, conv=conv)
        assert [p.file for p in planned] == files and all(p.nbytes == p.file.nbytes for p in planned)
    assert left_out > 0


def test_read_tensors_find_each_file_among_its_writers() -> None:
    m, par, conv = CATALOG["gpt2-125m"], Parallelism(1, 1, 2, 0), Convention("torch", "spread")
    wanted = replica_files(m, par, 0, 0.01, conv=conv)
    got = read_tensors(m, par, [0, 1], wanted, 0.01, conv=conv)
    assert [p.file for p in got] == wanted
    own = {p.file.name: p for r in (0, 1) for p in file_tensors(m, par, r, 0.01, conv=conv)}
    assert got == [own[f.name] for f in wanted]


@settings(max_examples=100, deadline=None)
@given(model=models, tp=st.sampled_from([1, 2, 4]), pp=st.integers(1, 3), dp=st.integers(1, 3),
       zero=st.integers(0, 3), scale=st.sampled_from([1.0, 0.5, 0.013]),
       writer=st.sampled_from(["dp0", "spread"]))
def test_a_torch_state_fills_every_file_exactly(model: ModelSpec, tp: int, pp: int, dp: int, zero: int,
                                                 scale: float, writer: str) -> None:
    """The per-parameter optimizer tensors change the count, never the bytes: every file as rank_files sizes it."""
    if layout_problems(model, tp * pp * dp, tp, pp, zero):
        return
    par, conv = Parallelism(tp, pp, dp, zero), Convention("torch", writer)  # type: ignore[arg-type]
    names: list[str] = []
    for rank in range(par.world_size):
        planned = file_tensors(model, par, rank, scale, conv=conv)
        assert [p.file for p in planned] == rank_files(model, par, rank, scale, conv=conv)
        for p in planned:
            assert p.nbytes == p.file.nbytes
            assert all(t.numel > 0 for t in p.tensors)
            names += [t.name for t in p.tensors]
    assert len(names) == len(set(names)), "a tensor name repeats across ranks: DCP would deduplicate it"


@pytest.mark.parametrize("name", ["gpt2-125m", "gpt2-1.5b", "llama3-8b"])
def test_a_torch_optimizer_holds_three_tensors_per_parameter_tensor(name: str) -> None:
    """With one writer (ZeRO 0, TP 1, PP 1) the optimizer file holds Adam m, v and step for every parameter tensor
    of the model, as a real AdamW state dict does (gpt2-1.5b: 580 each), plus each group's small tensor; the
    megatron one stays flat."""
    m, par = CATALOG[name], Parallelism(1, 1, 1, 0)
    parameter_tensors = sum(len(layer_tensors(m, i)) for i in range(m.num_layers + 3))
    (torch_optim,) = [p for p in file_tensors(m, par, 0, conv=Convention("torch")) if p.file.kind == "optimizer"]
    assert len(torch_optim.tensors) == 3 * parameter_tensors + 2
    assert sum(t.numel for t in torch_optim.tensors) == 2 * (num_parameters(m) + 5 * m.hidden_size) + parameter_tensors
    assert name != "gpt2-1.5b" or parameter_tensors == 580
    (flat,) = [p for p in file_tensors(m, par, 0) if p.file.kind == "optimizer"]
    assert len(flat.tensors) == 2 * len(GROUP_NAMES[3])
