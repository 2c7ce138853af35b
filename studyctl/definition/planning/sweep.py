"""The sweep file: schema, validation with `file:line: key: problem` errors, and aliases."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from studyctl.definition.checkpoint.points import CHECKPOINT_AXES, CheckpointOptions, IoMode
from studyctl.definition.checkpoint.recovery import Recovery, parse_recovery
from studyctl.definition.inputs.calibration_spec import CalibrationSetting, CalibrationSpec
from studyctl.definition.inputs.catalog import CATALOG, DIMENSIONS, DTYPE_BYTES, MlpKind, ModelSpec, lookup
from studyctl.definition.inputs.ceilings_spec import CeilingsSetting
from studyctl.definition.inputs.filesystems import FILESYSTEM_KINDS, FilesystemSpec
from studyctl.definition.inputs.names import plain_name
from studyctl.definition.inputs.options import LocalOptions, SlurmOptions
from studyctl.definition.inputs.training import TrainingSpec
from studyctl.definition.inputs.worlds import WORLD_AXES, Ranks, over_max_ranks
from studyctl.definition.inputs.yamlpos import Loc, line_of, load_yaml_with_lines
from studyctl.errors import UserError

ZERO_ALIASES = {"ddp": 0, "fsdp": 3, "zero0": 0, "zero1": 1, "zero2": 2, "zero3": 3}
DEFAULT_MAX_POINTS = 1_000_000
# Study, model and filesystem names end up in directory names and table keys: bounded and plain.
PlainName = Annotated[str, AfterValidator(plain_name)]


def _zero_alias(value: Any) -> Any:
    return ZERO_ALIASES.get(value.lower(), value) if isinstance(value, str) else value


ZeroStage = Annotated[Literal[0, 1, 2, 3], BeforeValidator(_zero_alias)]
RecoveryValue = Annotated[Recovery | None, BeforeValidator(parse_recovery)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InlineModel(_Strict):
    """A model given by its dimensions, with DLIO's key names, or a catalog model (`base`) with changes."""

    name: PlainName
    base: str | None = None
    num_layers: PositiveInt | None = None
    hidden_size: PositiveInt | None = None
    ffn_hidden_size: PositiveInt | None = None
    num_attention_heads: PositiveInt | None = None
    num_kv_heads: PositiveInt | None = None
    vocab_size: PositiveInt | None = None
    model_dtype: Literal[tuple(DTYPE_BYTES)] | None = None  # type: ignore[valid-type]
    optimizer_dtype: Literal[tuple(DTYPE_BYTES)] | None = None  # type: ignore[valid-type]
    mlp: MlpKind | None = None
    tied_embeddings: bool | None = None
    biases: bool | None = None
    position_embeddings: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _complete(self) -> InlineModel:
        if self.base is not None and lookup(self.base) is None:
            raise ValueError(f"base {self.base!r} is not in the catalog{_did_you_mean(self.base, CATALOG)}; "
                             f"catalog: {', '.join(CATALOG)}")
        if self.base is None:
            missing = [k for k in DIMENSIONS if k != "num_kv_heads" and getattr(self, k) is None]
            if missing:
                raise ValueError(f"model {self.name!r} needs {', '.join(missing)} (or base: a catalog model)")
        return self

    def spec(self) -> ModelSpec:
        given = {k: v for k, v in self.model_dump(exclude={"base"}).items() if v is not None}
        base = lookup(self.base) if self.base else None
        if base is not None:
            return replace(base, **given)
        given.setdefault("num_kv_heads", self.num_attention_heads)
        return ModelSpec(**given)


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) or value is None else [value]


def _listify(cls: type[BaseModel], data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _as_list(v) if k in cls.model_fields else v for k, v in data.items()}
    return data


class _PointAxes(_Strict):
    """The point's own axes; `Matrix` adds every checkpoint option that is an axis."""

    model: list[str] | None = None  # subset of `models` by name; default: all
    zero_stage: list[ZeroStage] = [1]
    nodes: list[Ranks] = [1]  # each value, and nodes × ranks_per_node, at most MAX_RANKS (2^20)
    ranks_per_node: list[Ranks] = [1]
    tensor_parallel: list[Ranks] = [1]
    pipeline_parallel: list[Ranks] = [1]
    filesystem: list[str] | None = None  # default: every filesystem
    io_mode: list[IoMode] = ["buffered"]
    recovery: list[RecoveryValue] = [None]  # restarts after a failure (definition.checkpoint.recovery); none: no
    # restart

    @model_validator(mode="before")
    @classmethod
    def _scalars_are_one_value_axes(cls, data: Any) -> Any:
        return _listify(cls, data)

    @field_validator("*", mode="after")
    @classmethod
    def _non_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("needs at least one value")
        return value


def _as_axis(option: FieldInfo) -> Any:
    """A checkpoint option as an axis: a list of what the option accepts, bounds included (None: not crossed)."""
    accepts = (option.annotation, *option.metadata)
    value = Annotated[accepts] if option.metadata else option.annotation
    return list[value] | None  # type: ignore[valid-type]


POINT_AXES: tuple[str, ...] = tuple(_PointAxes.model_fields)
if TYPE_CHECKING:
    class Matrix(_PointAxes):
        def __getattr__(self, axis: str) -> list[Any] | None: ...  # a checkpoint axis: its values, or None
else:
    Matrix = create_model(
        "Matrix", __base__=_PointAxes, __doc__="Axes to cross; a scalar means a one-value axis.",
        **{name: (_as_axis(CheckpointOptions.model_fields[name]), None) for name in CHECKPOINT_AXES})
AXES = POINT_AXES + CHECKPOINT_AXES
CONDITION = re.compile(r"^\s*(<=|>=|!=|==|<|>)\s*(\S.*?)\s*$")
STRING_RULE = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|!=|==|<|>)\s*([^<>=!\s].*?)\s*$")


class ExcludeRule(_Strict):
    """Matches points whose axes all match: a value, a list of values, or a condition "< 2"."""

    match: dict[str, Any]
    reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        if isinstance(data, str):  # "nodes < 2 and io_mode == direct"
            match: dict[str, Any] = {}
            for part in re.split(r"\s+and\s+", data.strip()):
                m = STRING_RULE.match(part)
                if not m:
                    raise ValueError(f"cannot parse condition {part!r}; write e.g. 'nodes < 2'")
                match[m.group(1)] = f"{m.group(2)} {m.group(3)}"
            return {"match": match, "reason": data.strip()}
        if isinstance(data, dict) and "match" not in data:
            data = dict(data)
            reason = data.pop("reason", None)
            return {"match": data, "reason": reason}
        return data

    @field_validator("match")
    @classmethod
    def _known_axes(cls, match: dict[str, Any]) -> dict[str, Any]:
        for key in match:
            if key not in AXES:
                raise ValueError(_unknown_axis(key))
        if not match:
            raise ValueError("an exclude rule needs at least one axis")
        return match


# Kinds a node-local tier may have: those whose every mount type is a node's own disk or memory.
TIER_KINDS = tuple(k for k, types in FILESYSTEM_KINDS.items()
                   if types and set(types) <= {*FILESYSTEM_KINDS["local"], *FILESYSTEM_KINDS["memory"]})


class Estimate(_Strict):
    """Assumptions for node-hour estimates before anything was measured."""

    GiBps_per_node: float = Field(1.0, gt=0)
    overhead_s: float = Field(30.0, ge=0)
    host_memory_gib: float | None = Field(None, gt=0, description="memory of one node: async points whose "
                                          "host-memory snapshots do not fit are excluded as infeasible")

    def run_seconds(self, moved_bytes: int, nodes: int, training_s: float = 0.0) -> float:
        """A point's estimated run time: overhead, its bytes at the assumed rate, its simulated training."""
        return self.overhead_s + moved_bytes / (nodes * self.GiBps_per_node * (1 << 30)) + training_s


def _zip_group(group: dict[str, list[Any]]) -> dict[str, list[Any]]:
    for key in group:
        if key not in AXES:
            raise ValueError(_unknown_axis(key))
        for value in group[key] if key in WORLD_AXES else ():
            if isinstance(value, int) and not isinstance(value, bool) and over_max_ranks(value):
                raise ValueError(f"{key}: {over_max_ranks(value)}")
    lengths = {len(v) for v in group.values()}
    if len(group) < 2 or len(lengths) != 1 or 0 in lengths:
        raise ValueError("a zip group needs two or more axes, lists of one equal, non-zero length")
    return group


class SweepFile(_Strict):
    study: str
    _source: Path | None = PrivateAttr(None)  # the file it came from, for errors found after validation
    description: str | None = None
    models: list[str | InlineModel]
    matrix: Matrix = Matrix()
    zip: list[Annotated[dict[str, list[Any]], AfterValidator(_zip_group)]] = []
    exclude: list[ExcludeRule] = []
    repetitions: PositiveInt = 1
    filesystems: dict[PlainName, FilesystemSpec]
    max_points: PositiveInt = Field(DEFAULT_MAX_POINTS, description="refuse a matrix that expands to more")
    checkpoint: CheckpointOptions = CheckpointOptions()
    estimate: Estimate = Estimate()
    training: TrainingSpec = TrainingSpec()
    ceilings: CeilingsSetting = "auto"  # a ceiling point per resource shape: definition.planning.ceilings
    calibration: CalibrationSetting = CalibrationSpec()  # larger-scale runs projections are fitted from
    local: LocalOptions = LocalOptions()
    slurm: SlurmOptions = SlurmOptions()

    @field_validator("study")
    @classmethod
    def _study_name(cls, value: str) -> str:
        return plain_name(value)

    @field_validator("models")
    @classmethod
    def _models_known(cls, models: list[str | InlineModel]) -> list[str | InlineModel]:
        if not models:
            raise ValueError("needs at least one model")
        for m in models:
            if isinstance(m, str) and lookup(m) is None:
                raise ValueError(f"{m!r} is not in the catalog{_did_you_mean(m, CATALOG)}; "
                                 f"catalog: {', '.join(CATALOG)} (or give the dimensions inline)")
        return models

    @field_validator("filesystems")
    @classmethod
    def _filesystems(cls, fs: dict[str, FilesystemSpec]) -> dict[str, FilesystemSpec]:
        if not fs:
            raise ValueError("needs at least one filesystem (name: {path: ...})")
        return fs

    @field_validator("zip")
    @classmethod
    def _zip_groups(cls, groups: list[dict[str, list[Any]]]) -> list[dict[str, list[Any]]]:
        seen: set[str] = set()
        for group in groups:
            for key in group:
                if key in seen:
                    raise ValueError(f"axis {key!r} is in two zip groups")
                seen.add(key)
        return groups

    @property
    def where(self) -> str:
        """How errors found after validation name this sweep: its file, else its study."""
        return str(self._source) if self._source else f"study {self.study}"

    def tier_filesystems(self) -> set[str]:
        """Filesystems named as a node-local tier: not measured as shared storage unless the matrix says so."""
        return {t for t in [self.checkpoint.tier, *(self.matrix.tier or []),
                            *(v for g in self.zip for v in g.get("tier", []))] if t}

    def model_specs(self) -> dict[str, ModelSpec]:
        out = {}
        for m in self.models:
            spec = lookup(m) if isinstance(m, str) else m.spec()
            assert spec is not None  # checked by the validator
            out[m if isinstance(m, str) else spec.name] = spec
        return out


def _unknown_axis(key: str) -> str:
    return f"unknown axis {key!r}{_did_you_mean(key, AXES)}; allowed: {', '.join(AXES)}"


def _did_you_mean(word: str, choices: Any) -> str:
    def norm(text: str) -> str:
        return re.sub(r"[-_. ]", "", text.lower())

    choices = [str(c) for c in choices]
    close = [c for c in choices if norm(c) == norm(str(word))] or difflib.get_close_matches(str(word), choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _allowed_keys(model: type[BaseModel], loc: Loc) -> list[str]:
    """Field names of the sub-model at `loc` (for did-you-mean on unknown keys)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            break
        ann = field.annotation
        current = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _clean_loc(loc: tuple[Any, ...]) -> Loc:
    """Drop pydantic's union/validator tags (e.g. 'InlineModel', 'str', 'function-after[...]')."""
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and (part in ("str", "InlineModel", "list[...]", "match") or "[" in part):
            continue
        out.append(part)
    return tuple(out)


def _describe(err: Mapping[str, Any], loc: Loc) -> str:
    kind, value = err["type"], err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = _allowed_keys(SweepFile, loc[:-1])
        hint = _did_you_mean(str(loc[-1]), allowed)
        return f"unknown key{hint}; allowed: {', '.join(allowed)}" if allowed else "unknown key"
    if kind == "literal_error":
        return f"{value!r} is not one of {ctx.get('expected', '').replace(' or ', ', ')}"
    if kind == "missing":
        return "required key is missing"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    return f"{value!r}: {err['msg'][0].lower()}{err['msg'][1:]}" if value is not None else err["msg"]


def _error_line(path: Path, lines: dict[Loc, int], err: Mapping[str, Any]) -> str:
    loc = _clean_loc(err["loc"])
    line = line_of(lines, loc)
    where = f"{path}:{line}" if line else str(path)
    key = ".".join(str(p) for p in loc) or "(top level)"
    return f"{where}: {key}: {_describe(err, loc)}"


def parse_sweep(data: Any, path: Path, lines: dict[Loc, int] | None = None) -> SweepFile:
    """Validate already-loaded sweep data; the first problem becomes a one-line UserError."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: a sweep file is a YAML mapping (keys: study, models, matrix, filesystems)")
    try:
        sweep = SweepFile.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # For `str | InlineModel` a mapping fails the str branch too; report the mapping's own problem.
        first = next((e for e in errors if e["type"] != "string_type"), errors[0])
        raise UserError(_error_line(path, lines, first)) from None
    _check_references(sweep, path, lines)
    return sweep


def load_sweep(path: Path) -> SweepFile:
    data, lines = load_yaml_with_lines(path)
    sweep = parse_sweep(data, path, lines)
    sweep._source = path
    return sweep


def _check_references(sweep: SweepFile, path: Path, lines: dict[Loc, int]) -> None:
    """Names used in the matrix must exist in `models` / `filesystems`; a tier must be of kind local."""
    names = {"model": list(sweep.model_specs()), "filesystem": list(sweep.filesystems),
             "tier": [n for n, fs in sweep.filesystems.items() if fs.kind in TIER_KINDS]}
    sources: list[tuple[Loc, str, list[Any]]] = [
        (("matrix", axis), axis, getattr(sweep.matrix, axis) or []) for axis in names
    ]
    sources += [(("zip", i, axis), axis, group[axis]) for i, group in enumerate(sweep.zip)
                for axis in names if axis in group]
    if sweep.checkpoint.tier is not None:
        sources.append((("checkpoint", "tier"), "tier", [sweep.checkpoint.tier]))
    for loc, axis, values in sources:
        for value in values:
            if value not in names[axis]:
                line = line_of(lines, loc)
                where = f"{path}:{line}" if line else str(path)
                allowed = (", ".join(map(str, names[axis]))
                           or f"none (a tier is a filesystem of kind {', '.join(TIER_KINDS)})")
                raise UserError(f"{where}: {'.'.join(map(str, loc))}: {value!r} is not one of "
                                f"{allowed}{_did_you_mean(str(value), names[axis])}")
    for i, group in enumerate(sweep.zip):
        for axis in group:
            if axis in sweep.matrix.model_fields_set:
                line = line_of(lines, ("zip", i, axis))
                raise UserError(f"{path}:{line}: zip.{i}.{axis}: axis also in matrix; give it in one place")
