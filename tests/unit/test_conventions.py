"""State conventions (14 vs 12 B/param) and replicated writers (dp0 vs spread) against an independent computation.

The oracle below takes DLIO's own layout (state megatron, writer dp0: the files the DLIO size table pins) and
applies the rules as the README states them, rank by rank over every running rank, without layout.py's
classes, pieces or groups: model files of state torch hold their elements at 4 B instead of 2, its optimizer 2
groups of (n + 5h) instead of 3, plus torch.optim's 4 B `step` for every parameter tensor of the rank's pipeline
stage (counted here from the architecture: norms, matrices, biases, embeddings per layer kind), unscaled; with
spread each file the replicas share is cut into DP pieces, piece d of B bytes being B // DP + (d < B % DP),
named `zero_pp_rank_{d}_` + the file's name. The totals layout.py gives
(from one representative rank per class) must agree with the brute force for every layout drawn.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from studyctl.definition.checkpoint.layout import (
    Convention,
    Parallelism,
    file_elements,
    layout_problems,
    rank_files,
    summarize,
    write_classes,
)
from studyctl.definition.checkpoint.points import CheckpointOptions, restore_bytes, restore_files
from studyctl.definition.inputs.catalog import ModelSpec, lookup

SMALL = ModelSpec("small", num_layers=4, hidden_size=512, ffn_hidden_size=1408, num_attention_heads=8,
                  num_kv_heads=2, vocab_size=8000)
SHARED = {0: ("model", "optimizer"), 1: ("model",), 2: ("model",), 3: ()}  # what DP replicas hold in common


def _parameter_tensors(m: ModelSpec, layer: int) -> int:
    """How many parameter tensors a layer index has: 0 embedding (+ positions), 1..L transformer, L+1 the
    output head (none when tied), L+2 the final norm (weight, + bias)."""
    norm = 2 if m.biases else 1
    if layer == 0:
        return 1 + bool(m.position_embeddings)
    if layer == m.num_layers + 1:
        return 0 if m.tied_embeddings else 1
    if layer == m.num_layers + 2:
        return norm
    return 2 * norm + 4 + (4 if m.biases else 0)  # 2 norms, qkv, out, up, down (+ their 4 biases)


def _stage_steps(m: ModelSpec, pp: int, stage: int) -> int:
    """Parameter tensors of a pipeline stage, its layers cut as DLIO cuts them (the first L mod PP stages one
    more transformer layer; the embedding in the first, head and final norm in the last)."""
    base, extra = divmod(m.num_layers, pp)
    first = sum(base + (s < extra) for s in range(stage)) + 1
    layers = list(range(first, first + base + (stage < extra)))
    layers += [0] if stage == 0 else []
    layers += [m.num_layers + 1, m.num_layers + 2] if stage == pp - 1 else []
    return sum(_parameter_tensors(m, i) for i in layers)


def _oracle(m: ModelSpec, par: Parallelism, scale: float, state: str, writer: str) -> list[list[tuple[str, int, str]]]:
    """Every running rank's (name, bytes, kind), from DLIO's nominal files and the rules alone."""
    mp = par.tensor * par.pipeline
    out = []
    for rank in range(par.ranks):
        dp = rank // mp
        base = rank_files(m, par, rank % mp if par.zero_stage < 3 else rank, 1.0)  # DLIO's files, replica 0's
        files = []
        for f in base:
            nominal = f.nbytes
            if state == "torch":
                nominal = nominal * 2 if f.kind == "model" else nominal // 3 * 2
            nbytes = nominal if scale >= 1 else max(1, int(nominal * scale))
            if state == "torch" and f.kind == "optimizer":
                nbytes += 4 * _stage_steps(m, par.pipeline, (rank // par.tensor) % par.pipeline)
            shared = f.kind in SHARED[par.zero_stage]
            name = f.name if par.zero_stage == 3 or not (f.kind == "optimizer" and not shared) \
                else f.name.replace("zero_pp_rank_0_", f"zero_pp_rank_{dp}_")
            if not shared:
                files.append((name, nbytes, f.kind))
            elif writer == "dp0":
                if dp == 0:
                    files.append((name, nbytes, f.kind))
            else:
                size = nbytes // par.data + (1 if dp < nbytes % par.data else 0)
                prefix = f"zero_pp_rank_{dp}_"
                stem = name.replace("zero_pp_rank_0_", "", 1) if name.startswith("zero_pp_rank_0_") else name
                if size:
                    files.append((prefix + stem, size, f.kind))
        out.append(files)
    return out


def _as_tuples(files: list) -> list[tuple[str, int, str]]:
    return [(f.name, f.nbytes, f.kind) for f in files]


def test_small_model_by_hand() -> None:
    """19,468,800 parameters, h 512, one rank, ZeRO 0: 14 vs 12 bytes per parameter (plus DLIO's 5h small)."""
    n, small = 19_468_800, 5 * 512
    par = Parallelism(1, 1, 1, 0)
    megatron, torch = summarize(SMALL, par), summarize(SMALL, par, 1.0, Convention("torch"))
    assert megatron.total_bytes == n * 2 + 3 * (n + small) * 4
    assert torch.total_bytes == n * 4 + 2 * (n + small) * 4 + 4 * (1 + 4 * 6 + 1 + 1)  # + a step per tensor
    assert torch.model_bytes == n * 4


def test_spread_names_and_pieces_by_hand() -> None:
    """ZeRO-1, DP 3, weights 38,937,600 B: pieces of 12,979,200 each; DP rank 2 names its piece by its index."""
    par, conv = Parallelism(1, 1, 3, 1), Convention(replicated_writer="spread")
    names = [[(f.name, f.nbytes) for f in rank_files(SMALL, par, r, conv=conv) if f.kind == "model"] for r in range(3)]
    assert names == [[(f"zero_pp_rank_{d}_model_0_model_states.pt", 12_979_200)] for d in range(3)]
    zero0 = [f.name for f in rank_files(SMALL, Parallelism(1, 1, 3, 0), 2, conv=conv)]
    assert zero0 == ["zero_pp_rank_2_mp_rank_0_model_states.pt", "zero_pp_rank_2_mp_rank_0_optim_states.pt"]


def test_file_elements_fill_each_file() -> None:
    conv = Convention("torch", "spread")
    for f in rank_files(SMALL, Parallelism(1, 1, 3, 0), 1, 0.013, conv=conv):
        dtype, elements, tail = file_elements(SMALL, conv, f)
        assert dtype == "fp32" and elements * 4 + tail == f.nbytes and 0 <= tail < 4
    bf16 = rank_files(SMALL, Parallelism(1, 1, 1, 0), 0)[0]
    assert file_elements(SMALL, Convention(), bf16)[:1] == ("bf16",)


models = st.builds(
    lambda layers, heads, head_dim, ffn, vocab, tied: ModelSpec(
        "m", layers, heads * head_dim, ffn, heads, heads, vocab, mlp="plain" if tied else "gated",
        tied_embeddings=tied, biases=tied),
    st.integers(1, 9), st.sampled_from([1, 2, 4]), st.sampled_from([3, 8]), st.integers(1, 97), st.integers(1, 301),
    st.booleans())


@settings(max_examples=300, deadline=None)
@given(model=models, tp=st.sampled_from([1, 2, 4]), pp=st.integers(1, 4), dp=st.integers(1, 9),
       zero=st.integers(0, 3), scale=st.sampled_from([1.0, 0.3, 1e-6]), state=st.sampled_from(["megatron", "torch"]),
       writer=st.sampled_from(["dp0", "spread"]), subset=st.integers(0, 5), restore=st.sampled_from(["rank", "full"]))
def test_sizes_agree_with_brute_force(model: ModelSpec, tp: int, pp: int, dp: int, zero: int, scale: float,
                                      state: str, writer: str, subset: int, restore: str) -> None:
    world = tp * pp * dp
    if layout_problems(model, world, tp, pp, zero):
        return
    running = max(1, world - subset * tp) if subset else 0  # MLPerf subset mode: only the first ranks run
    par = Parallelism(tp, pp, dp, zero, running)
    conv = Convention(state, writer)  # type: ignore[arg-type]
    want = _oracle(model, par, scale, state, writer)
    got = [_as_tuples(rank_files(model, par, r, scale, conv=conv)) for r in range(par.ranks)]
    assert got == want
    s = summarize(model, par, scale, conv)
    assert s.total_bytes == sum(b for files in want for _, b, _ in files)
    assert s.model_bytes == sum(b for files in want for _, b, k in files if k == "model")
    assert s.files_per_checkpoint == sum(len(files) for files in want)
    assert s.bytes_per_rank_max == max(sum(b for _, b, _ in files) for files in want)
    assert s.bytes_per_rank_min == min(sum(b for _, b, _ in files) for files in want)
    assert s.writer_ranks == sum(1 for files in want if files)
    assert sum(n for _, n in write_classes(model, par, scale, conv)) == par.ranks
    names = [n for files in want for n, _, _ in files]
    assert len(names) == len(set(names))
    if state == "megatron" and writer == "dp0":
        assert s == summarize(model, par, scale)  # the default convention is today's layout
    # a restore: own files, and with full every file (or piece) of what the replicas share, from those that ran
    opts = CheckpointOptions(scale=scale, restore=restore, state=state, replicated_writer=writer)  # type: ignore[arg-type]
    shared = {(n, b) for rank, files in enumerate(want) for n, b, k in files if k in SHARED[zero]}
    expected = 0
    for rank, files in enumerate(want):
        own = {(n, b) for n, b, _ in files}
        mine = own | {(n, b) for n, b in shared
                      if restore == "full" and _mp_of(n, want, rank % (tp * pp), tp * pp)}
        expected += sum(b for _, b in mine)
        assert {(f.name, f.nbytes) for f in restore_files(model, par, rank, opts)} == mine
    assert restore_bytes(model, par, opts) == expected


def _mp_of(name: str, want: list[list[tuple[str, int, str]]], mp: int, mp_size: int) -> bool:
    """The shared file (or piece) was written by a rank of model-parallel rank `mp`."""
    return any(n == name for rank in range(mp, len(want), mp_size) for n, _, _ in want[rank])


def test_catalog_model_spread_totals_equal_dp0() -> None:
    """Spreading moves bytes between ranks, never adds or drops one; torch state is 12/14 of the parameters'."""
    m = lookup("llama_70b")
    par = Parallelism(8, 4, 2, 1)
    dp0, spread = summarize(m, par), summarize(m, par, 1.0, Convention(replicated_writer="spread"))
    assert spread.total_bytes == dp0.total_bytes and spread.bytes_per_rank_max < dp0.bytes_per_rank_max
    assert spread.writer_ranks == dp0.writer_ranks == 64


def test_broadcast_reads_shared_pieces_once_per_replica_group() -> None:
    """restore broadcast with spread: storage serves every rank's own unshared files and, once per model-parallel
    rank (its group's root), every DP rank's piece of what the replicas share."""
    from studyctl.definition.planning.plan import storage_read_bytes

    par = Parallelism(2, 1, 3, 0)
    opts = CheckpointOptions(restore="broadcast", replicated_writer="spread", state="torch", scale=0.01)
    per_rank = [rank_files(SMALL, par, r, 0.01, conv=opts.convention) for r in range(par.ranks)]
    assert all(f.kind in ("model", "optimizer") for files in per_rank for f in files)  # ZeRO 0: all shared
    assert storage_read_bytes(SMALL, par, opts) == sum(f.nbytes for files in per_rank for f in files)
    assert restore_bytes(SMALL, par, opts) == 3 * storage_read_bytes(SMALL, par, opts)  # every rank holds it all


def test_reshard_refuses_other_states_and_writers() -> None:
    from studyctl.definition.checkpoint.points import Point
    from studyctl.definition.checkpoint.recovery import parse_recovery
    from studyctl.definition.planning.recovery_plan import point_recovery_problems

    def problems(recovery: object, **opts: object) -> list[str]:
        point = Point(model=SMALL, zero_stage=1, nodes=2, ranks_per_node=2, filesystem="x",
                      checkpoint=CheckpointOptions(writes=1, reads=1, **opts),  # type: ignore[arg-type]
                      recovery=parse_recovery(recovery))
        return point_recovery_problems(point)

    assert problems({"shrink_to": 2}) == [] and problems("same", state="torch", replicated_writer="spread") == []
    assert [p.split(":")[0] for p in problems({"shrink_to": 2}, state="torch", replicated_writer="spread")] == [
        "recovery shrink_to 2 with checkpoint.state torch",
        "recovery shrink_to 2 with checkpoint.replicated_writer spread"]
    assert problems("same", engine="dcp")[0].startswith("recovery same with checkpoint.engine dcp:")
