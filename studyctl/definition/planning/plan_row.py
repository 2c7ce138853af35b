"""One plan row, typed: what a point writes, needs and costs, in groups that are there or not as a whole.

The record is the one source of the row's keys: `plan --json` writes `json()` (its key order is the fields' order,
each group flattened where it stands), and the CLI, the summary and the added points' fit read attributes.
A group is None where it does not apply: `objects` off an object store, `sized` and `needs` for a point whose
layout is impossible (their keys are written as null), `restart` without a restart onto another layout (its keys
are left out).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from studyctl.definition.checkpoint.restart_plan import RESTART_KEYS, RestartColumns
from studyctl.definition.planning.needs import TrainingNeeds


@dataclass(frozen=True, slots=True)
class ObjectColumns:
    """On an object store: the objects and requests a checkpoint and a restore make at the part size
    (definition.checkpoint.objects), in all and on the busiest rank."""

    part_mib: int
    s3_concurrency: int
    objects_per_checkpoint: int
    put_requests_per_checkpoint: int
    part_requests_per_checkpoint: int
    get_requests_per_restore: int
    write_requests_per_rank_max: int
    read_requests_per_rank_max: int


@dataclass(frozen=True, slots=True)
class SizedColumns:
    """Sizes, memory, disk and time: the same for every filesystem and repetition of a cell."""

    checkpoint_bytes: int
    nominal_checkpoint_bytes: int
    read_bytes_per_restore: int  # what the ranks hold afterwards (the worker's figure of the same name)
    storage_read_bytes_per_restore: int
    broadcast_bytes_per_restore: int  # received over MPI (restore broadcast)
    nominal_storage_read_bytes: int
    bytes_per_rank_max: int
    bytes_per_rank_min: int
    files_per_checkpoint: int
    engine_files: str
    tensor_memory_per_host_bytes: int
    writer_ranks: int
    disk_bytes_needed: int
    disk_bytes_required: int
    snapshot_memory_per_host_bytes: int
    worker_memory_per_host_bytes: int
    worker_memory_per_point_bytes: int
    dlio_memory_per_host_bytes: int
    simulated_training_s: float
    estimated_seconds: float
    node_hours: float


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One point of the plan. The fields up to `recovery` are every row's; the groups follow (in GROUPS' order)."""

    point_id: str
    model: str
    zero_stage: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    nodes: int
    ranks_per_node: int
    world_size: int
    filesystem: str
    io_mode: str
    repetition: int
    role: str
    excluded: bool
    exclude_kind: str | None
    exclude_reason: str | None
    parameters: int
    scale: float
    strategy: str
    writes: int
    reads: int
    restore: str
    rank_shift: int
    block_mib: int
    cold_read: str
    fsync: bool
    naming: str
    subset_world_size: int | None
    engine: str
    device: str
    state: str
    replicated_writer: str
    engine_label: str
    recovery: str  # the scenario in the sweep's words; "none"
    objects: ObjectColumns | None = None
    sized: SizedColumns | None = None
    restart: RestartColumns | None = None
    needs: TrainingNeeds | None = None

    def json(self) -> dict[str, Any]:
        """The row `plan --json` writes: flat, every group's keys where the group stands (null for a missing
        group, but a missing restart's are left out); a key two groups share is written once, where it first
        stands."""
        row = {k: getattr(self, k) for k in OWN_ORDER}
        for group in GROUPS:
            value = getattr(self, group)
            if isinstance(value, RestartColumns):
                row.update(value.json())
            elif value is not None:
                for k in GROUPS[group]:
                    if k not in row:
                        row[k] = getattr(value, k)
            elif group != "restart":
                for k in GROUPS[group]:
                    row.setdefault(k, None)
        return row


def with_columns(own: dict[str, Any], sized: SizedColumns, update: dict[str, Any]) -> SizedColumns:
    """Replace some of a row's own columns (in `own`, changed in place) and of its sized ones by name (a ceiling
    point's probe figures): the sized columns with theirs replaced."""
    unknown = set(update) - set(OWN_ORDER) - set(GROUPS["sized"])
    if unknown:
        raise ValueError(f"not columns of a sized plan row: {sorted(unknown)}")
    own.update({k: v for k, v in update.items() if k in own})
    return dataclasses.replace(sized, **{k: v for k, v in update.items() if k not in own})


# each group's keys as `json()` writes them
GROUPS: dict[str, tuple[str, ...]] = {
    "objects": tuple(f.name for f in fields(ObjectColumns)),
    "sized": tuple(f.name for f in fields(SizedColumns)),
    "restart": RESTART_KEYS,
    "needs": tuple(f.name for f in fields(TrainingNeeds)),
}
OWN_ORDER = tuple(f.name for f in fields(PlanRow) if f.name not in GROUPS)
OWN_KEYS = frozenset(OWN_ORDER)
