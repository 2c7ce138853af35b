"""Plan's restart view: a same-shape side that agrees with what plan says a restore reads today, restart sides
from the reshard map, and the lines plan prints."""

from __future__ import annotations

from dataclasses import replace

import pytest

from studyctl.cli.plan_restarts import collect_restart, print_restarts
from studyctl.definition.checkpoint.layout import Parallelism
from studyctl.definition.checkpoint.points import CheckpointOptions, restore_bytes
from studyctl.definition.checkpoint.reshard import ReshardError, reshard_reads, restart_parallelism
from studyctl.definition.checkpoint.restart_plan import RESTART_KEYS, restart_columns, restart_fields
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import plan_row, storage_read_bytes
from studyctl.definition.planning.plan_row import PlanRow
from tests.unit.test_expand import sweep_of

MODEL = lookup("llama_7b")


@pytest.mark.parametrize("restore", ["rank", "full", "broadcast"])
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_the_same_shape_side_is_what_plan_says_a_restore_reads(zero: int, restore: str) -> None:
    for layout in [(1, 1, 4), (2, 1, 2)] + ([(1, 2, 2)] if zero < 3 else []):
        old = Parallelism(*layout, zero)
        opts = CheckpointOptions(restore=restore, scale=0.01)
        row = restart_fields(MODEL, old, restart_parallelism(old, 8), opts.scale, opts.naming, restore)
        assert set(row) == set(RESTART_KEYS)
        assert row["same_shape_total_bytes"] == storage_read_bytes(MODEL, old, opts)
        assert row["same_shape_broadcast_bytes"] == restore_bytes(MODEL, old, opts) - storage_read_bytes(MODEL, old,
                                                                                                          opts)


def test_the_restart_side_sums_the_map_per_rank() -> None:
    old = Parallelism(1, 1, 4, 1)
    new = restart_parallelism(old, 2)
    row = restart_fields(MODEL, old, new, 0.01, "dlio", "full")
    per_rank = [sum(r.length for r in reshard_reads(MODEL, old, new, k, 0.01)) for k in range(2)]
    assert row["restart_layout"] == "1×1×2" and row["restart_ranks"] == 2
    assert row["restart_total_bytes"] == sum(per_rank) and row["restart_bytes_per_rank_max"] == max(per_rank)
    assert row["restart_files_opened_max"] == 3 and row["same_shape_files_opened_max"] == 2
    # 4 → 2: each rank holds twice the optimizer piece, the weights once, as a same-shape rank does
    assert row["restart_bytes_per_rank_max"] > row["same_shape_bytes_per_rank_max"]


def test_an_impossible_restart_is_the_reshard_error() -> None:
    with pytest.raises(ReshardError, match="tensor_parallel 3 does not divide num_attention_heads 32"):
        restart_fields(MODEL, Parallelism(1, 1, 4, 1), Parallelism(3, 1, 1, 1), 1.0, "dlio", "full")


def test_plan_prints_one_line_pair_per_restart(capsys: pytest.CaptureFixture[str]) -> None:
    old = Parallelism(1, 1, 4, 1)
    sweep = sweep_of(matrix={"zero_stage": [1], "nodes": [1], "ranks_per_node": 4}, repetitions=1)
    planned = next(plan_row(pp, sweep) for pp in expand(sweep))
    base = replace(planned, model="llama_7b", zero_stage=1, tensor_parallel=1, pipeline_parallel=1, data_parallel=4,
                   scale=0.01, restore="broadcast", excluded=False)
    restarts: dict[tuple, PlanRow] = {}
    for world, rep in [(2, 0), (2, 1), (8, 0)]:  # two repetitions of one restart: one line
        collect_restart(restarts, replace(base, repetition=rep, restart=restart_columns(
            MODEL, old, restart_parallelism(old, world), 0.01, "dlio", "broadcast")))
    collect_restart(restarts, replace(base, excluded=True, restart=restart_columns(
        MODEL, old, restart_parallelism(old, 16), 0.01, "dlio", "broadcast")))
    print_restarts(restarts)
    text = capsys.readouterr().out
    assert text.count("→") == 2 and "1×1×4 → 1×1×2 (TP×PP×DP, 2 ranks)" in text and "1×1×16" not in text
    assert text.count("resharded:") == 2 and text.count("same shape:") == 2 and "by broadcast" in text
