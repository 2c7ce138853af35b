"""What a restore reads from storage, per class of ranks and in all: the restore mode's rule
(`restore_rules.RestoreRule.from_storage`) applied to a point's layout. The plan's read columns, the object
requests of a restore and the run-time estimate count these bytes."""

from __future__ import annotations

from functools import lru_cache

from studyctl.definition.checkpoint.layout import CheckpointFile, Parallelism, rank_files, replica_files, write_classes
from studyctl.definition.checkpoint.points import CheckpointOptions, replicated_kinds, restore_bytes
from studyctl.definition.checkpoint.restore_rules import restore_rule
from studyctl.definition.inputs.catalog import ModelSpec


@lru_cache(maxsize=4096)
def storage_read_bytes(m: ModelSpec, par: Parallelism, opts: CheckpointOptions) -> int:
    """Bytes storage serves in one restore: every file a rank holds afterwards, but those it receives from its
    group's reader (worker.restore.broadcast_split); rank shift only permutes who reads what."""
    if not restore_rule(opts.restore).broadcasts:  # every rank reads all it holds
        return restore_bytes(m, par, opts)
    return sum(count * sum(f.nbytes for f in files) for count, files in storage_read_files(m, par, opts))


def storage_read_files(m: ModelSpec, par: Parallelism, opts: CheckpointOptions
                       ) -> list[tuple[int, list[CheckpointFile]]]:
    """Per class of ranks: (its ranks, the files each reads from storage in one restore), by the restore mode's
    rule. A group's reader is its data-parallel replica 0 (one class member per group)."""
    rule, conv = restore_rule(opts.restore), opts.convention
    kinds = replicated_kinds(par.zero_stage)
    out = []
    for rank, count in write_classes(m, par, opts.scale, conv):
        written = rank_files(m, par, rank, opts.scale, opts.naming, conv)
        shared = replica_files(m, par, rank % par.model_parallel, opts.scale, opts.naming, conv) \
            if rule.every_rank_holds_shared else []
        own = [f for f in written if f.kind not in kinds]
        out.append((count, rule.from_storage(written, own, shared, reader=par.coords(rank)[2] == 0)))
    return out
