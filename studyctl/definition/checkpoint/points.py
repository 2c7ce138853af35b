"""A point: one frozen, validated run configuration with a stable id."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict

from studyctl.definition.checkpoint.engine_options import (  # the engine's names, where a point's options are found
    ENGINE_OPTION_DEFAULTS as ENGINE_OPTION_DEFAULTS,
)
from studyctl.definition.checkpoint.engine_options import (
    EngineOptions,
    engine_options,
)
from studyctl.definition.checkpoint.layout import (
    CheckpointFile,
    LayoutSummary,
    Naming,
    Parallelism,
    disk_steps_needed,
    layout_problems,
    rank_files,
    replica_files,
    summarize,
    write_classes,
)
from studyctl.definition.checkpoint.layout import (
    replicated_kinds as replicated_kinds,  # where its callers have long found it
)
from studyctl.definition.checkpoint.places import Place, point_places, study_dir_name
from studyctl.definition.checkpoint.recovery import Recovery
from studyctl.definition.checkpoint.restore_rules import restore_rule
from studyctl.definition.inputs.catalog import ARCHITECTURE_DEFAULTS, ModelSpec
from studyctl.definition.inputs.filesystems import ObjectStoreSpec
from studyctl.definition.inputs.point_id import OMIT_AT_DEFAULT, canonical_id, later, later_defaults
from studyctl.definition.inputs.training import ComputeModel, SimulatedStep
from studyctl.definition.inputs.vocabulary import (  # the checkpoint vocabulary, where the options' callers find it
    ColdRead as ColdRead,
)
from studyctl.definition.inputs.vocabulary import ColdReadMethod as ColdReadMethod
from studyctl.definition.inputs.vocabulary import DcpExecutor as DcpExecutor
from studyctl.definition.inputs.vocabulary import DrainBy as DrainBy
from studyctl.definition.inputs.vocabulary import Engine as Engine
from studyctl.definition.inputs.vocabulary import IoMode as IoMode
from studyctl.definition.inputs.vocabulary import PointRole as PointRole
from studyctl.definition.inputs.vocabulary import ReplicatedWriter as ReplicatedWriter
from studyctl.definition.inputs.vocabulary import RestoreMode as RestoreMode
from studyctl.definition.inputs.vocabulary import StateConvention as StateConvention
from studyctl.definition.inputs.vocabulary import StateDevice as StateDevice
from studyctl.definition.inputs.vocabulary import Strategy as Strategy
from studyctl.definition.inputs.worlds import Ranks
from studyctl.objstore.limits import MAX_PART_BYTES, MIN_PART_BYTES

_OMIT_AT_DEFAULT: JsonDict = OMIT_AT_DEFAULT  # point_id's marker: out of a point's identity at its default
# Every checkpoint option is a sweep axis (`matrix:`, `zip:`, `exclude:`) unless marked with this.
_NOT_AN_AXIS: JsonDict = {"axis": False}
# Simulated training steps an async/tiered rank runs once, to calibrate its step before the first checkpoint.
CALIBRATION_STEPS = 3
# Idle steps (nothing in the background) an async/tiered rank runs right before and right after each
# checkpoint's background window: the reference its steps during the window are compared with.
IDLE_STEPS = 3
# A tiered point's replaced nodes unless the sweep sets them: a failure's restore, where one node lost its tier.
REPLACED_NODES = 1


class CheckpointOptions(EngineOptions):
    """How each point writes and reads its checkpoints (the engine's options first: `EngineOptions`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    writes: int = Field(10, ge=0, description="checkpoints written (MLPerf: 10)")
    reads: int = Field(10, ge=0, description="restores after the writes")
    scale: float = Field(1.0, gt=0, le=1, description="shrinks every tensor; layout kept")
    buffer_mib: int = Field(64, ge=1, description="the one reused buffer per rank")
    block_mib: int = Field(16, ge=1, description="bytes per write/read call")
    cold_read: ColdRead = "auto"
    rank_shift: int = Field(0, ge=0, description="rank r restores the files of rank r+shift")
    restore: RestoreMode = "rank"
    direct_fallback: bool = Field(False, description="O_DIRECT refused: run buffered, say so")
    keep: bool = Field(False, json_schema_extra=_NOT_AN_AXIS,
                       description="keep every checkpoint written (default: deleted as it goes)")
    free_space_margin: float = Field(0.05, ge=0, le=1, json_schema_extra=_NOT_AN_AXIS,
                                     description="fraction kept free")
    naming: Naming = later("dlio", description="file and folder names: DLIO's exactly, or DeepSpeed's")
    fsync: bool = later(True, description="fsync every file; false only mirrors DLIO, labelled 'no fsync'")
    subset_world_size: Ranks | None = later(None, description=(
        "MLPerf subset mode (node-local storage): the full run's process count; this point's ranks write "
        "the first ranks' share of that run's checkpoint"))
    strategy: Strategy = Field("sync", json_schema_extra=_OMIT_AT_DEFAULT,
                               description="sync: training waits for every file; async: host-memory snapshot, "
                                           "persisted in the background; tiered: node-local tier, then drained")
    tier: str | None = Field(None, json_schema_extra=_OMIT_AT_DEFAULT,
                             description="tiered: the node-local filesystem (a `filesystems` entry of kind local)")
    drain: DrainBy = Field("rank", json_schema_extra=_OMIT_AT_DEFAULT,
                           description="tiered: every rank drains its files, or one drainer per node")
    tier_keep: int = Field(1, ge=1, json_schema_extra=_OMIT_AT_DEFAULT,
                           description="tiered: checkpoints kept on the node-local tier")
    # Unset in a sweep, a tiered point gets REPLACED_NODES (`for_strategy`); the model's own default stays 0, the
    # value before a restore meant a failure's, so stored points and old results keep their ids.
    replaced_nodes: int = Field(0, ge=0, json_schema_extra=_OMIT_AT_DEFAULT,
                                description="tiered: nodes whose tier is wiped before restoring (replaced after a "
                                            "failure): they restore from shared storage; 0: a no-failure restore; "
                                            "default 1")
    step_s: float | None = Field(None, gt=0, json_schema_extra={**_OMIT_AT_DEFAULT, **_NOT_AN_AXIS},
                                 description="async/tiered: compute per simulated training step "
                                             "(training.simulated_step.compute_s)")
    compute: ComputeModel | None = Field(None, json_schema_extra={**_OMIT_AT_DEFAULT, **_NOT_AN_AXIS},
                                         description="async/tiered: how the simulated step computes "
                                                     "(training.simulated_step.compute)")
    allreduce_mib: float | None = Field(None, ge=0, json_schema_extra={**_OMIT_AT_DEFAULT, **_NOT_AN_AXIS},
                                        description="async/tiered: gradient all-reduce per simulated step and rank "
                                                    "(training.simulated_step.allreduce_mib)")
    dispatch_share: float | None = Field(None, ge=0, le=1, json_schema_extra={**_OMIT_AT_DEFAULT, **_NOT_AN_AXIS},
                                         description="async/tiered: the step's host dispatch share "
                                                     "(training.simulated_step.dispatch_share; None: its compute "
                                                     "model's default)")
    part_mib: int = Field(16, ge=MIN_PART_BYTES >> 20, le=MAX_PART_BYTES >> 20, json_schema_extra=_OMIT_AT_DEFAULT,
                          description="object stores: multipart part size (an object at or below it is one PUT) "
                                      "and ranged-GET size (S3's smallest and largest part; at most 10,000 parts "
                                      "an object: plan refuses a point whose largest object needs more)")
    s3_concurrency: int = Field(4, ge=1, le=64, json_schema_extra=_OMIT_AT_DEFAULT,
                                description="object stores: part uploads or ranged GETs in flight per rank")
    @model_validator(mode="after")
    def _consistent(self) -> CheckpointOptions:
        if self.block_mib > self.buffer_mib:
            raise ValueError(f"block_mib {self.block_mib} exceeds buffer_mib {self.buffer_mib}")
        if self.writes == 0 and self.reads > 0:
            raise ValueError(f"reads {self.reads} with writes 0: a restore reads a checkpoint this point wrote")
        if self.strategy == "tiered" and self.tier is None:
            raise ValueError("strategy tiered needs checkpoint.tier: a filesystem of kind local")
        return self

    def for_strategy(self, step: SimulatedStep) -> CheckpointOptions:
        """Options that do not apply to this strategy or engine back at their defaults (so they are not part of
        the point's identity); background strategies get the simulated training step they overlap with, and tiered
        points REPLACED_NODES unless the sweep set them."""
        background = self.strategy != "sync"
        update: dict[str, object] = {"step_s": step.compute_s if background else None,
                                     "compute": step.compute if background else None,
                                     "allreduce_mib": step.allreduce_mib if background else None,
                                     "dispatch_share": step.point_dispatch_share() if background else None}
        if self.strategy != "tiered":
            update.update({name: TIER_OPTION_DEFAULTS[name] for name in TIER_OPTION_DEFAULTS})
        elif "replaced_nodes" not in self.model_fields_set:
            update["replaced_nodes"] = REPLACED_NODES
        applies = engine_options(self.engine, self.strategy)
        update.update({name: default for name, default in ENGINE_OPTION_DEFAULTS.items() if name not in applies})
        return self if all(getattr(self, k) == v for k, v in update.items()) else self.model_copy(update=update)

    def disk_bytes_required(self, checkpoint_bytes: int) -> int:
        """Free space a point needs before it starts (the worker refuses less, and plan and submit say so first):
        its checkpoints on disk at once, plus `free_space_margin`."""
        return int(checkpoint_bytes * disk_steps_needed(self.writes, self.reads, self.keep)
                   * (1 + self.free_space_margin))

    def simulated_steps(self) -> int:
        """The least simulated steps an async/tiered point runs: its calibration, then per write the idle
        steps before and after and one step beside the background (however fast the storage); 0 for sync."""
        if self.strategy == "sync" or self.step_s is None:
            return 0
        return CALIBRATION_STEPS + self.writes * (2 * IDLE_STEPS + 1)

    def simulated_training_s(self) -> float:
        """The least simulated compute an async/tiered point runs (its all-reduces not counted)."""
        return self.simulated_steps() * (self.step_s or 0.0)


# The options a sweep may vary, in the order they are crossed: derived here, declared nowhere else.
CHECKPOINT_AXES: tuple[str, ...] = tuple(
    name for name, f in CheckpointOptions.model_fields.items()
    if not (isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("axis") is False))


def cold_read_method(io_mode: str, cold_read: ColdRead) -> ColdReadMethod:
    """What `cold_read: auto` means for an I/O mode: O_DIRECT where the writes bypass the cache, else fadvise."""
    if cold_read == "direct" or cold_read == "fadvise" or cold_read == "none":
        return cold_read
    return "direct" if io_mode in ("direct", "hybrid") else "fadvise"


def restore_files(m: ModelSpec, par: Parallelism, rank: int, opts: CheckpointOptions) -> list[CheckpointFile]:
    """What `rank` holds after a restore (its mode's `RestoreRule.held`): its partner's files (rank + rank_shift),
    and where the mode says every rank holds them, what a real training restore needs and DLIO skips: the states
    its DP replicas share (`replica_files`: replica 0's weights, and with ZeRO 0 its optimizer; with spread every
    DP rank's piece)."""
    source = (rank + opts.rank_shift) % par.ranks
    conv = opts.convention
    rule = restore_rule(opts.restore)
    written = rank_files(m, par, source, opts.scale, opts.naming, conv)
    shared = replica_files(m, par, source % par.model_parallel, opts.scale, opts.naming, conv) \
        if rule.every_rank_holds_shared else []
    return rule.held(written, shared)


@lru_cache(maxsize=4096)
def restore_bytes(m: ModelSpec, par: Parallelism, opts: CheckpointOptions) -> int:
    """Bytes every running rank reads in one restore together (rank shift only permutes who reads what)."""
    unshifted = opts.model_copy(update={"rank_shift": 0})
    return sum(count * sum(f.nbytes for f in restore_files(m, par, rank, unshifted))
               for rank, count in write_classes(m, par, opts.scale, opts.convention))


class Point(BaseModel):
    """Everything that defines a measurement; `point_id` hashes it (not paths, not the study)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: ModelSpec
    zero_stage: int = Field(ge=0, le=3)
    tensor_parallel: int = Field(1, ge=1)
    pipeline_parallel: int = Field(1, ge=1)
    nodes: int = Field(1, ge=1)
    ranks_per_node: int = Field(1, ge=1)
    filesystem: str
    io_mode: IoMode = "buffered"
    repetition: int = Field(0, ge=0)
    checkpoint: CheckpointOptions = CheckpointOptions()
    # Added after points were first hashed: part of the id only when not at its default (POINT_OMIT_AT_DEFAULT).
    role: PointRole = later("measure")
    recovery: Recovery | None = later(None)  # a restart after a failure: definition.checkpoint.recovery

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def data_parallel(self) -> int:
        """DP of the run the checkpoint is sized for (the full run in subset mode)."""
        full = self.checkpoint.subset_world_size or self.world_size
        return max(1, full // (self.tensor_parallel * self.pipeline_parallel))

    @property
    def parallelism(self) -> Parallelism:
        subset = self.checkpoint.subset_world_size is not None
        return Parallelism(self.tensor_parallel, self.pipeline_parallel, self.data_parallel,
                           self.zero_stage, self.world_size if subset else 0)

    def problems(self) -> list[str]:
        return layout_problems(self.model, self.world_size, self.tensor_parallel,
                               self.pipeline_parallel, self.zero_stage, self.checkpoint.subset_world_size)

    def layout(self) -> LayoutSummary:
        """Written bytes (scaled); call only when `problems()` is empty."""
        return summarize(self.model, self.parallelism, self.checkpoint.scale, self.checkpoint.convention)

    def nominal_layout(self) -> LayoutSummary:
        return summarize(self.model, self.parallelism, 1.0, self.checkpoint.convention)

    def canonical(self) -> dict:
        return json.loads(self.canonical_json())

    def canonical_json(self) -> str:
        """`json.dumps(canonical(), sort_keys=True, separators=(",", ":"))`, built from cached parts.

        Planning hashes every point of 100,000-point studies; the model and checkpoint parts repeat.
        """
        scalars: tuple[tuple[str, str], ...] = (
            ("filesystem", json.dumps(self.filesystem)),
            ("io_mode", json.dumps(self.io_mode)),
            ("model", _model_json(self.model)),
            ("nodes", str(self.nodes)),
            ("pipeline_parallel", str(self.pipeline_parallel)),
            ("ranks_per_node", str(self.ranks_per_node)),
            ("repetition", str(self.repetition)),
            ("tensor_parallel", str(self.tensor_parallel)),
            ("zero_stage", str(self.zero_stage)),
        )
        later = tuple((k, _json(getattr(self, k))) for k, default in POINT_OMIT_AT_DEFAULT.items()
                      if getattr(self, k) != default)
        if later:
            scalars = tuple(sorted((*scalars, *later)))
        body = ",".join(f'"{k}":{v}' for k, v in scalars)
        return '{"checkpoint":' + _checkpoint_json(self.checkpoint) + "," + body + "}"

    @cached_property
    def point_id(self) -> str:
        return canonical_id(self.canonical_json())

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Point:
        """A copy never inherits the cached id of the point it was copied from (the id hashes the new fields)."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("point_id", None)
        return copy


# Point fields added after studies were run: in a point's canonical form (and its id) only when not at these.
POINT_OMIT_AT_DEFAULT: dict[str, object] = later_defaults(Point)


def _json(value: object) -> str:
    """A later field's canonical JSON (a nested model by its fields, keys sorted)."""
    plain = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return json.dumps(plain, sort_keys=True, separators=(",", ":"))

# Settings added after studies were run: left out of a point's identity while at their defaults, so a
# point means the same id before and after (the file names a point writes are not what it measures).
LATER_CHECKPOINT_DEFAULTS: dict[str, object] = later_defaults(CheckpointOptions)


def _without(data: dict, defaults: dict[str, object]) -> dict:
    return {k: v for k, v in data.items() if not (k in defaults and v == defaults[k])}


@lru_cache(maxsize=256)
def _model_json(model: ModelSpec) -> str:
    return json.dumps(_without(dataclasses.asdict(model), ARCHITECTURE_DEFAULTS), sort_keys=True,
                      separators=(",", ":"))


TIER_OPTION_DEFAULTS = {name: CheckpointOptions.model_fields[name].default
                        for name in ("tier", "drain", "tier_keep", "replaced_nodes")}
@lru_cache(maxsize=1024)
def _checkpoint_json(options: CheckpointOptions) -> str:
    return json.dumps(_without(options.model_dump(mode="json"), LATER_CHECKPOINT_DEFAULTS), sort_keys=True,
                      separators=(",", ":"))


class WorkerTask(BaseModel):
    """What a backend hands the worker: the point plus where to write."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    study: str
    point_id: str
    attempt: int = Field(1, ge=1)
    point: Point
    filesystem_path: str
    filesystem_kind: str | None = None  # checked against the mount's real fstype before anything is written
    data_key: str = ""  # names the results directory: two studies of one name never share checkpoint files
    result_path: str  # rank 0 writes the result JSON here, atomically
    error_path: str  # on a known failure rank 0 writes {"failure_class", "reason"} here
    tier_path: str | None = None  # tiered: the node-local tier; "{node}" in it becomes each node's name
    tier_kind: str | None = None  # the tier's declared kind, checked like filesystem_kind before its first byte
    # a ceiling point of a study with `ceilings: shared` (definition.planning.ceilings): the results directory whose
    # studies
    # (this one is `<it>/<study>`) share their ceilings; None: the point measures its own
    shared_ceilings_root: str | None = None
    # a filesystem of kind s3: how to reach it (filesystem_path is then s3://BUCKET[/PREFIX]); None: POSIX
    object_store: ObjectStoreSpec | None = None

    @property
    def places(self) -> tuple[Place, ...]:
        """Every directory this attempt writes (definition.checkpoint.places): the data directory first, then the
        tier."""
        return point_places(study_dir_name(self.study, self.data_key), self.point_id, self.filesystem_path,
                            self.tier_path, self.object_store)

    @property
    def data_dir(self) -> Path:
        """The only directory the worker writes in or deletes: `<filesystem>/<study>.<key>/<point_id>`."""
        return self.places[0].path

    @property
    def claim_file(self) -> Path:
        """Held (flock) by the attempt writing `data_dir`: a second live writer is refused, never interleaved."""
        return self.places[0].claim_file


def data_key(results_study_dir: Path) -> str:
    """A short stable key of a study directory's absolute path."""
    return hashlib.sha256(str(results_study_dir.resolve()).encode()).hexdigest()[:8]
