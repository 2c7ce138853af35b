"""DLIO's output files, read and validated like our own result files: a damaged one is a reason, never a crash.

A DLIO folder is data from someone else: summary.json, `<rank>_per_epoch_stats.json` (or an older rank-0
`per_epoch_stats.json`) and, optionally, `.hydra/config.yaml`. Each is opened by `attempt.tree`'s rules
(regular files inside the folder, bounded), parsed, and validated against the fields we use: counts are
positive integers, sizes, rates and durations finite and non-negative, rates under 1 PiB/s, names follow
the sweep files' rule. Keys we do not use are ignored (DLIO adds keys between versions). The first problem
is `DlioDamaged`: the file and a one-line reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.plausibility import MAX_GIBPS
from studyctl.attempt.tree import file_status, read_regular
from studyctl.definition.inputs.yamlpos import load_yaml_bounded
from studyctl.errors import UserError

MAX_COUNT = 2**31 - 1  # hosts, accelerators, parallel degrees: every table column holds it
MAX_CHECKPOINT_GIB = float(2**30)  # 1 EiB: far beyond any checkpoint, and its bytes fit a 64-bit column


class DlioDamaged(UserError):
    """One file of a DLIO folder that cannot be used, and why (one line)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def _blank_is_missing(value: Any) -> Any:
    return None if value == "" else value  # older DLIO wrote "" for a missing duration


Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Seconds = Annotated[float | None, BeforeValidator(_blank_is_missing), Field(ge=0, allow_inf_nan=False)]
Rate = Annotated[float | None, BeforeValidator(_blank_is_missing), Field(ge=0, le=MAX_GIBPS, allow_inf_nan=False)]
Stamp = Annotated[str | None, Field(max_length=64)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Metric(_Open):
    checkpoint_size_GB: Annotated[float, Field(ge=0, le=MAX_CHECKPOINT_GIB, allow_inf_nan=False)] = 0.0
    checkpoint_io_mean_GB_per_second: Rate = None  # older DLIO: saves only, no prefix
    save_checkpoint_io_mean_GB_per_second: Rate = None
    load_checkpoint_io_mean_GB_per_second: Rate = None
    checkpoint_duration_mean_seconds: Seconds = None
    save_checkpoint_duration_mean_seconds: Seconds = None
    load_checkpoint_duration_mean_seconds: Seconds = None

    def mean_GiBps(self, prefix: str) -> float | None:
        """DLIO's own rank-0 figure (older DLIO: one unprefixed set, saves only)."""
        value = getattr(self, f"{prefix}checkpoint_io_mean_GB_per_second")
        return self.checkpoint_io_mean_GB_per_second if value is None and prefix == "save_" else value

    def duration_s(self, prefix: str) -> float | None:
        value = getattr(self, f"{prefix}checkpoint_duration_mean_seconds")
        return self.checkpoint_duration_mean_seconds if value is None and prefix == "save_" else value


class Summary(_Open):
    num_hosts: Count = 1
    num_accelerators: Count | None = None
    workload: str | None = None
    model: str | None = None
    start: Stamp = None
    metric: Metric | None = None


class Record(_Open):
    """One rank's record of one checkpoint save or load."""

    start: Stamp = None
    end: Stamp = None
    duration: Seconds = None
    throughput: Rate = None


class Parallelism(_Open):
    tensor: Count | None = None
    pipeline: Count | None = None
    zero_stage: Literal[0, 1, 2, 3] | None = None


class HydraModel(_Open):
    name: str | None = None
    parallelism: Parallelism | None = None


class HydraCheckpoint(_Open):
    """`workload.checkpoint` of DLIO's saved config: what decides whether its writes were synced.

    DLIO's stock writer never fsyncs (its `fsync` key sets a field the writer does not read); a custom
    checkpoint class (`checkpoint_mechanism_classname`, a plugin) does what its code does."""

    fsync: bool | None = None
    checkpoint_mechanism_classname: Annotated[str | None, Field(max_length=200)] = None
    recovery_rank_shift: Annotated[int | None, Field(ge=0, le=MAX_COUNT)] = None


class HydraConfig(_Open):
    model: HydraModel | None = None
    checkpoint: HydraCheckpoint | None = None


def describe(exc: ValidationError) -> str:
    """The first error as one line: the key, what is wrong, and the value (shortened)."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    where = ".".join(str(x) for x in err["loc"]) or "(top level)"
    value = repr(err.get("input"))
    shown = value if len(value) <= 40 else value[:40] + "…"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where} = {shown}: {err['msg']}{more}"


def load_json(path: Path, folder: Path) -> Any:
    """A DLIO JSON file's content; DlioDamaged for a file we may not open or cannot parse."""
    st, why = file_status(path, StudyPaths(folder), "the DLIO folder")
    if st is None:
        raise DlioDamaged(path, str(why))
    try:
        return json.loads(read_regular(path))
    except OSError as exc:
        raise DlioDamaged(path, f"unreadable: {exc.strerror}") from None
    except RecursionError:
        raise DlioDamaged(path, "nested too deeply to be DLIO output") from None
    except ValueError as exc:
        raise DlioDamaged(path, f"not valid JSON (truncated or corrupt): {exc}") from None


def validated(model: type[_Open], data: Any, path: Path, where: str = "") -> Any:
    """`data` as `model`; DlioDamaged naming the file and the key otherwise."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise DlioDamaged(path, f"{where or 'the file'} is a JSON {kind}, not an object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise DlioDamaged(path, (f"{where}." if where else "") + describe(exc)) from None


def load_summary(path: Path, folder: Path) -> Summary:
    summary: Summary = validated(Summary, load_json(path, folder), path)
    accelerators = summary.num_accelerators or summary.num_hosts
    if accelerators < summary.num_hosts:
        raise DlioDamaged(path, f"num_accelerators = {accelerators} is fewer than num_hosts = {summary.num_hosts}")
    if accelerators % summary.num_hosts:
        raise DlioDamaged(path, f"num_accelerators = {accelerators} is not a multiple of num_hosts = "
                                f"{summary.num_hosts} (DLIO runs the same number of processes on every host)")
    return summary


def hydra_config(folder: Path) -> HydraConfig:
    """Model, parallelism and checkpoint settings from DLIO's saved Hydra config (empty when the run kept none)."""
    path = folder / ".hydra" / "config.yaml"
    if not os.path.lexists(path):
        return HydraConfig()
    st, why = file_status(path, StudyPaths(folder), "the DLIO folder")
    if st is None:
        raise DlioDamaged(path, str(why))
    try:
        cfg = load_yaml_bounded(path)
    except UserError as exc:
        raise DlioDamaged(path, str(exc).removeprefix(f"{path}: ")) from None
    if not isinstance(cfg, dict):
        raise DlioDamaged(path, f"the file is a YAML {type(cfg).__name__}, not a mapping")
    workload = cfg.get("workload", cfg)
    if not isinstance(workload, dict):
        return HydraConfig()
    where = "workload." if "workload" in cfg else ""
    parts = {key: validated(model, workload[key], path, where + key)
             for key, model in (("model", HydraModel), ("checkpoint", HydraCheckpoint))
             if workload.get(key) is not None}
    return HydraConfig(**parts)
