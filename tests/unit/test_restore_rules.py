"""One rule per restore mode: every mode of the vocabulary has a rule, the options accept it and the result schema
records it; and the rule's lists (held, read from storage, received) are what the plan, the reshard map and the
worker's broadcast split compute from the real layout."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import TypeAdapter

from studyctl.definition.checkpoint.layout import rank_files, replica_files
from studyctl.definition.checkpoint.points import (
    CheckpointOptions,
    Point,
    replicated_kinds,
    restore_bytes,
    restore_files,
)
from studyctl.definition.checkpoint.reshard import rank_reads
from studyctl.definition.checkpoint.restore_reads import storage_read_bytes, storage_read_files
from studyctl.definition.checkpoint.restore_rules import RESTORE_RULES, named_rule, restore_rule
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.vocabulary import RestoreMode
from studyctl.definition.result.result_fields import StrategyInfo
from studyctl.definition.result.result_schema import IoInfo
from worker.restore import broadcast_split

MODES = get_args(RestoreMode)


def test_every_mode_has_a_rule_and_no_rule_lacks_a_mode() -> None:
    assert set(RESTORE_RULES) == set(MODES)
    assert all(rule.mode == mode for mode, rule in RESTORE_RULES.items())


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_is_an_option_and_a_schema_entry(mode: str) -> None:
    """A mode the options accept is one a result records (else every result of it is unusable at collect)."""
    assert CheckpointOptions(restore=mode).restore == mode  # type: ignore[arg-type]
    for model in (IoInfo, StrategyInfo):
        assert TypeAdapter(model.model_fields["restore_mode"].annotation).validate_python(mode) == mode


def test_an_unknown_mode_is_named() -> None:
    assert named_rule("scatter") is None and named_rule(float("nan")) is None
    with pytest.raises(KeyError, match="scatter"):
        restore_rule("scatter")


def _point(mode: str, zero: int, writer: str = "dp0") -> Point:
    return Point(model=lookup("gpt2-125m"), zero_stage=zero, tensor_parallel=2, nodes=2, ranks_per_node=2,
                 filesystem="x", checkpoint=CheckpointOptions(restore=mode, replicated_writer=writer))  # type: ignore[arg-type]


@pytest.mark.parametrize("writer", ["dp0", "spread"])
@pytest.mark.parametrize("zero", [0, 1, 3])
@pytest.mark.parametrize("mode", MODES)
def test_the_rule_is_what_the_layout_reads(mode: str, zero: int, writer: str) -> None:
    """Per rank of a real layout (TP 2 × DP 2): what the rule says it holds is `restore_files`; what it reads from
    storage and what it receives make up what it holds; storage serves the plan's bytes; and for a broadcast the
    worker's split gives the reader what the rule reads and the others what the rule receives."""
    point = _point(mode, zero, writer)
    m, par, opts = point.model, point.parallelism, point.checkpoint
    rule, conv, kinds = restore_rule(mode), opts.convention, replicated_kinds(zero)
    read_total = 0
    for rank in range(par.ranks):
        written = rank_files(m, par, rank, opts.scale, opts.naming, conv)
        own = [f for f in written if f.kind not in kinds]
        shared = replica_files(m, par, rank % par.model_parallel, opts.scale, opts.naming, conv)
        reader = par.coords(rank)[2] == 0
        held = rule.held(written, shared)
        assert [f.name for f in held] == [f.name for f in restore_files(m, par, rank, opts)]
        read, got = rule.from_storage(written, own, shared, reader), rule.received(shared, reader)
        assert {f.name for f in read} | {f.name for f in got} == {f.name for f in held}
        read_total += sum(f.nbytes for f in read)
        if rule.broadcasts:
            _, split_own, split_shared = broadcast_split(point, par, rank)
            assert {f.name for f in split_own} | ({f.name for f in split_shared} if reader else set()) == \
                {f.name for f in read}
            assert [f.name for f in got] == ([] if reader else [f.name for f in split_shared])
    assert read_total == storage_read_bytes(m, par, opts)
    assert sum(count for count, _ in storage_read_files(m, par, opts)) == par.ranks
    if not rule.broadcasts:
        assert read_total == restore_bytes(m, par, opts)  # every rank reads all it holds


@pytest.mark.parametrize("mode", MODES)
def test_the_reshard_map_reads_by_the_rule(mode: str) -> None:
    rule = restore_rule(mode)
    own, shared = ["own"], ["shared"]
    for reader in (True, False):
        expect = own + shared if (rule.every_rank_reads_shared or reader) else own
        assert rank_reads(own, shared, reader, mode) == expect  # type: ignore[arg-type]
