"""A point: one frozen, validated run configuration with a stable id."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from studyctl.spec.catalog import ModelSpec
from studyctl.spec.layout import LayoutSummary, Parallelism, layout_problems, summarize

IO_MODES = ("buffered", "direct", "hybrid")
IoMode = Literal["buffered", "direct", "hybrid"]
ColdRead = Literal["auto", "direct", "fadvise", "none"]
RestoreMode = Literal["rank", "full"]


class CheckpointOptions(BaseModel):
    """How each point writes and reads its checkpoints."""

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
    keep: bool = False
    free_space_margin: float = Field(0.05, ge=0, le=1, description="fraction kept free")

    @model_validator(mode="after")
    def _consistent(self) -> CheckpointOptions:
        if self.block_mib > self.buffer_mib:
            raise ValueError(f"block_mib {self.block_mib} exceeds buffer_mib {self.buffer_mib}")
        if self.writes == 0 and self.reads > 0:
            raise ValueError(f"reads {self.reads} with writes 0: a restore reads a checkpoint this point wrote")
        return self


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

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def data_parallel(self) -> int:
        return max(1, self.world_size // (self.tensor_parallel * self.pipeline_parallel))

    @property
    def parallelism(self) -> Parallelism:
        return Parallelism(self.tensor_parallel, self.pipeline_parallel, self.data_parallel,
                           self.zero_stage)

    def problems(self) -> list[str]:
        return layout_problems(self.model, self.world_size, self.tensor_parallel,
                               self.pipeline_parallel, self.zero_stage)

    def layout(self) -> LayoutSummary:
        """Written bytes (scaled); call only when `problems()` is empty."""
        return summarize(self.model, self.parallelism, self.checkpoint.scale)

    def nominal_layout(self) -> LayoutSummary:
        return summarize(self.model, self.parallelism, 1.0)

    def canonical(self) -> dict:
        return self.model_dump(mode="json")

    def canonical_json(self, without_repetition: bool = False) -> str:
        """`json.dumps(canonical(), sort_keys=True, separators=(",", ":"))`, built from cached parts.

        Planning hashes every point of 100,000-point studies; the model and checkpoint parts repeat.
        """
        scalars = (
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
        body = ",".join(f'"{k}":{v}' for k, v in scalars if not (without_repetition and k == "repetition"))
        return '{"checkpoint":' + _checkpoint_json(self.checkpoint) + "," + body + "}"

    @cached_property
    def point_id(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:12]

    @property
    def cell_key(self) -> str:
        """Identity of the point minus its repetition: what statistics group over."""
        return hashlib.sha256(self.canonical_json(without_repetition=True).encode()).hexdigest()[:12]


@lru_cache(maxsize=256)
def _model_json(model: ModelSpec) -> str:
    return json.dumps(dataclasses.asdict(model), sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=1024)
def _checkpoint_json(options: CheckpointOptions) -> str:
    return json.dumps(options.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


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

    @property
    def data_dir(self) -> Path:
        """The only directory the worker writes in or deletes: `<filesystem>/<study>.<key>/<point_id>`."""
        study_dir = f"{self.study}.{self.data_key}" if self.data_key else self.study
        return Path(self.filesystem_path) / study_dir / self.point_id

    @property
    def claim_file(self) -> Path:
        """Held (flock) by the attempt writing `data_dir`: a second live writer is refused, never interleaved."""
        return self.data_dir.parent / f".{self.point_id}.lock"


def data_key(results_study_dir: Path) -> str:
    """A short stable key of a study directory's absolute path."""
    return hashlib.sha256(str(results_study_dir.resolve()).encode()).hexdigest()[:8]
