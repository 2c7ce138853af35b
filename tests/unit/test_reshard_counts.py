"""The plan's restart figures by arithmetic equal the sum, rank by rank, of what each restarted rank reads
(`reshard_split`, the map the worker reads by), on small worlds of every ZeRO stage, layout change and scale."""

from __future__ import annotations

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from studyctl.definition.checkpoint.layout import Parallelism, layout_problems
from studyctl.definition.checkpoint.reshard import ReshardError, rank_reads, reshard_split, restart_parallelism
from studyctl.definition.checkpoint.reshard_counts import ReshardSummary, floor_sum, reshard_summary
from studyctl.definition.inputs.catalog import CATALOG, ModelSpec

TINY = ModelSpec("tiny", num_layers=4, hidden_size=20, ffn_hidden_size=30, num_attention_heads=4, num_kv_heads=2,
                 vocab_size=33)
GPTISH = ModelSpec("gptish", num_layers=3, hidden_size=16, ffn_hidden_size=40, num_attention_heads=4,
                   num_kv_heads=4, vocab_size=30, mlp="plain", tied_embeddings=True, biases=True,
                   position_embeddings=8)
MODELS = (TINY, GPTISH, CATALOG["llama_7b"])


def rank_by_rank(model: ModelSpec, old: Parallelism, new: Parallelism, scale: float, restore: str
                 ) -> ReshardSummary:
    """Every rank's reads listed and summed: what the worker reads, the reference the arithmetic must equal."""
    files, nbytes, sent = [], [], 0
    for rank in range(new.world_size):
        _, own, shared = reshard_split(model, old, new, rank, scale)
        root = rank < new.model_parallel
        reads = rank_reads(own, shared, root, restore)
        files.append(len({r.name for r in reads}))
        nbytes.append(sum(r.length for r in reads))
        if restore == "broadcast" and not root:
            sent += sum(r.length for r in shared)
    return ReshardSummary(new.world_size, max(files), sum(files) / len(files), max(nbytes),
                          sum(nbytes) / len(nbytes), sum(nbytes), sent)


@st.composite
def restarts(draw: st.DrawFn) -> tuple[ModelSpec, Parallelism, Parallelism]:
    """A valid checkpoint layout and a valid restart of it, small enough to list every rank's reads."""
    model, zero = draw(st.sampled_from(MODELS)), draw(st.sampled_from((0, 1, 2, 3)))
    most_pp = 1 if zero == 3 else 3  # ZeRO-3 runs one pipeline stage
    tp, pp, dp = draw(st.sampled_from((1, 2, 4))), draw(st.integers(1, most_pp)), draw(st.integers(1, 5))
    assume(not layout_problems(model, tp * pp * dp, tp, pp, zero))
    old = Parallelism(tp, pp, dp, zero)
    world = draw(st.integers(1, 12))
    new_tp, new_pp = draw(st.sampled_from((None, 1, 2, 4))), draw(st.sampled_from((None, 1, 2, 3)[:most_pp + 1]))
    try:
        return model, old, restart_parallelism(old, world, new_tp, new_pp, model=model)
    except ReshardError:
        assume(False)
        raise


@settings(max_examples=400, deadline=None)
@given(case=restarts(), scale=st.sampled_from((1.0, 0.5, 0.07, 0.003, 1e-6)),
       restore=st.sampled_from(("full", "rank", "broadcast")))
@example(case=(TINY, Parallelism(1, 1, 3, 3), Parallelism(1, 1, 2, 3)), scale=1.0, restore="full")  # a remainder
@example(case=(TINY, Parallelism(2, 1, 3, 3), Parallelism(4, 1, 2, 3)), scale=0.07, restore="rank")  # TP 2 → 4
@example(case=(GPTISH, Parallelism(1, 2, 2, 1), Parallelism(1, 1, 3, 1)), scale=0.003, restore="broadcast")
def test_the_arithmetic_equals_the_map_summed_rank_by_rank(case: tuple[ModelSpec, Parallelism, Parallelism],
                                                           scale: float, restore: str) -> None:
    model, old, new = case
    assert reshard_summary(model, old, new, scale, "dlio", restore) == rank_by_rank(model, old, new, scale, restore)


@given(n=st.integers(0, 40), m=st.integers(1, 10**12), a=st.integers(0, 10**12), b=st.integers(0, 10**12))
def test_floor_sum_is_the_sum_of_floors(n: int, m: int, a: int, b: int) -> None:
    assert floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))
