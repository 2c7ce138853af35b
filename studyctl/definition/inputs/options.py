"""How a sweep asks each backend to run its points: the `local:` and `slurm:` sections.

Typed here, in the spec, so the sweep holds them directly and no layer below the backends needs
to import one to validate a sweep file.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator


class LocalOptions(BaseModel):
    """The sweep's `local:` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent: PositiveInt = 1
    timeout_s: PositiveInt = 3600
    mpiexec: str | None = None  # default: the mpiexec beside this Python
    mpiexec_args: list[str] = []
    # Simulated nodes share this machine: up to this many ranks per core (they mostly wait on I/O); a point
    # with more ranks, or whose buffers exceed the available memory, is FAILED before anything starts.
    max_ranks_per_core: PositiveInt = 8


# sbatch options the backend sets itself: `sbatch_extra` may not override them.
MANAGED_SBATCH = {
    "array": "one array per shape", "job-name": "studyctl names jobs", "output": "submitit's logs",
    "error": "submitit's logs", "open-mode": "submitit's logs", "signal": "submitit's time-limit signal",
    "nodes": "points set nodes", "ntasks-per-node": "points set ranks_per_node", "ntasks": "points set ranks",
    "time": "slurm.time_limit_min", "partition": "slurm.partition", "account": "slurm.account",
    "qos": "slurm.qos", "constraint": "slurm.constraint", "exclusive": "slurm.exclusive",
    "comment": "studyctl's job comment", "wrap": "submitit writes the script",
    "requeue": "slurm.max_requeues", "no-requeue": "slurm.max_requeues",
}


class SlurmOptions(BaseModel):
    """The sweep's `slurm:` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_min: int | None = Field(None, ge=1, description="per point; default: from planned bytes")
    assumed_GiBps_per_node: float = Field(0.5, gt=0, description="for derived time limits (pessimistic)")
    min_time_limit_min: int = Field(5, ge=1, description="floor of derived time limits")
    constraint: str | None = None
    exclusive: bool = False
    mpi: str = Field("pmi2", description="srun --mpi (pmi2 for the mpich wheel, pmix for Open MPI)")
    array_parallelism: int = Field(256, ge=1, description="array elements running at once (--array=…%N)")
    sbatch_extra: dict[str, str | int | bool] | list[str] = Field(
        default_factory=dict, description="more #SBATCH options: {reservation: x} or ['--reservation=x']")
    srun_args: list[str] = Field(default_factory=list, description="more srun arguments (not --mpi)")
    setup: list[str] = Field(default_factory=list, description="shell lines run before srun (module load …)")
    max_requeues: int = Field(2, ge=0, description="times Slurm may requeue a point's job (preemption) before "
                              "studyctl cancels it as PREEMPTED; 0: --no-requeue. Not resubmit retries")
    python: str | None = Field(None, description="interpreter command on the nodes; default: this one")
    max_array_size: int | None = Field(None, ge=1, description="default: the cluster's MaxArraySize")

    @field_validator("mpi")
    @classmethod
    def _mpi_word(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
            raise ValueError(f"{value!r} is not an srun --mpi type (e.g. pmi2, pmix, none)")
        return value

    @field_validator("srun_args")
    @classmethod
    def _no_mpi_in_srun_args(cls, value: list[str]) -> list[str]:
        if any(a == "--mpi" or a.startswith("--mpi=") for a in value):
            raise ValueError("set the MPI type with slurm.mpi, not in srun_args")
        return value

    @field_validator("sbatch_extra")
    @classmethod
    def _extra_not_managed(cls, value: dict[str, str | int | bool] | list[str]) -> Any:
        for key in sbatch_extra_dict(value):
            if key in MANAGED_SBATCH:
                raise ValueError(f"--{key} is set by studyctl ({MANAGED_SBATCH[key]}); "
                                 "remove it from sbatch_extra")
        return value

    def sbatch_parameters(self) -> dict[str, str | int | bool]:
        """`sbatch_extra` as submitit's `additional_parameters` (key → value, True for flags)."""
        return sbatch_extra_dict(self.sbatch_extra)


def sbatch_extra_dict(value: dict[str, str | int | bool] | list[str]) -> dict[str, str | int | bool]:
    items: list[tuple[str, str | int | bool]]
    if isinstance(value, dict):
        items = list(value.items())
    else:
        items = []
        for arg in value:
            if not arg.startswith("-"):
                raise ValueError(f"sbatch_extra entry {arg!r} is not an option like '--reservation=x'")
            name, eq, text = arg.lstrip("-").partition("=")
            items.append((name, text if eq else True))
    out: dict[str, str | int | bool] = {}
    for key, val in items:
        if val is False:
            continue  # "not set" is Slurm's default; submitit would write --key=False
        out[key.strip().lstrip("-").replace("_", "-")] = val
    return out
