"""The tensors a training framework holds in each checkpoint file (pure): what the torch engines save.

A framework never writes raw bytes: it serializes named tensors. For every file a rank writes
(`layout.rank_files`) this module names the tensors that file holds, with their dtypes and element counts,
following the in-file layout of `tensor_layout`:

- a **model file** holds the rank's piece of every tensor of its pipeline stage (its TP block, cut again by
  ZeRO-3), layer by layer in DLIO's order; with one file per layer, that layer's pieces only;
- an **optimizer file** holds its groups (fp32 master weights when the weights are kept in a lower precision,
  Adam m, Adam v), each its partition of the flat parameter vector and the 5h small tensor every writer holds.
  Megatron and DeepSpeed hold a partition as one flat tensor; torch.optim holds its state per parameter, so
  under state torch the partition is cut at the parameter tensors' bounds into one tensor per tensor it
  covers (`tensor_layout.parameter_runs`), named after the parameter (`layers.{layer}.{j}.exp_avg`), as many
  records as a real AdamW state dict (torch.distributed.checkpoint writes one per tensor). After its groups it
  holds torch.optim's per-parameter `step`: a 0-dim fp32 tensor for every parameter tensor of the rank's stage
  (`model_tensors.stage_parameters`, `layers.{layer}.{j}.step`), the bytes state torch adds to the file
  (`layout.optimizer_step_bytes`); steps follow the parameters the rank holds, as torch.optim keys its state,
  the moments the flat partition, where DLIO's sizes put them.

The state convention (`layout.Convention`) names the dtypes and the optimizer's groups (megatron: bf16 weights,
fp32 master + Adam m, v; torch: fp32 weights, Adam m, v); the file's size (one source: `rank_files`) must be
what they fill, and a file they do not explain is refused (`UnknownLayout`). A piece of a shared file cut over
the data-parallel ranks (`replicated_writer: spread`, Megatron's fully parallel save) is a flat run of the
file's elements (`layout.file_elements`), as Megatron saves a flattened buffer's shard. With `scale` < 1
every tensor shrinks in proportion (floor), the last tensor of the file
takes the rounding, and the bytes short of one element (a scaled size need not be a multiple of the element
size) are a trailing uint8 tensor, so a file's tensors always sum to its `nbytes` exactly; steps are never
scaled (the layout adds them unscaled), so the moments fill what the steps leave.

Names are unique over the ranks of a checkpoint (the file name is their prefix: DLIO's names are unique in a
step directory), so torch.distributed.checkpoint saves every rank's tensors instead of deduplicating them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from studyctl.definition.checkpoint.layout import (
    DEFAULT_CONVENTION,
    STEP_DTYPE,
    CheckpointFile,
    Convention,
    Naming,
    Parallelism,
    file_dtype,
    file_elements,
    optimizer_step_bytes,
    rank_files,
    replicated_kinds,
)
from studyctl.definition.checkpoint.model_tensors import layer_tensors, stage_layers, stage_parameters
from studyctl.definition.checkpoint.tensor_layout import (
    held,
    model_shards,
    optimizer_piece,
    optimizer_sizes,
    parameter_runs,
)
from studyctl.definition.inputs.catalog import DTYPE_BYTES, ModelSpec

# The groups an optimizer file holds, by how many there are: Adam's two moments, and the fp32 master weights
# first when the model keeps its weights in a lower precision (Megatron, DeepSpeed ZeRO-1/2).
GROUP_NAMES: dict[int, tuple[str, ...]] = {2: ("exp_avg", "exp_avg_sq"), 3: ("fp32_master", "exp_avg", "exp_avg_sq")}
PAD_DTYPE = "uint8"
ELEMENT_BYTES: dict[str, int] = {**DTYPE_BYTES, PAD_DTYPE: 1}
# The torch dtype of each name above (fp8 as e4m3, the one training frameworks store weights in).
TORCH_DTYPES: dict[str, str] = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                                "fp8": "float8_e4m3fn", PAD_DTYPE: "uint8"}


@dataclass(frozen=True)
class TensorSpec:
    """One named tensor of a file: its dtype (a catalog dtype name, or uint8 for the padding) and elements;
    `scalar`: a 0-dim tensor of one element (an optimizer step), else 1-D."""

    name: str
    dtype: str
    numel: int
    scalar: bool = False

    @property
    def nbytes(self) -> int:
        return self.numel * ELEMENT_BYTES[self.dtype]

    @property
    def shape(self) -> tuple[int, ...]:
        return () if self.scalar else (self.numel,)


@dataclass(frozen=True)
class FileTensors:
    file: CheckpointFile
    tensors: tuple[TensorSpec, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


class UnknownLayout(ValueError):
    """A file whose size no dtype or group count of this module explains."""


def _model_pieces(m: ModelSpec, par: Parallelism, rank: int, layers: range) -> list[tuple[str, int]]:
    """(name, elements) of the rank's piece of every tensor of these layers, DLIO's order."""
    tp, _, dp = par.coords(rank)
    shards = model_shards(par)
    shard = dp if shards > 1 else 0
    out = []
    for layer in layers:
        for j, (n, split) in enumerate(layer_tensors(m, layer)):
            lo, hi = held(n, split, par.tensor, shards, tp, shard)
            out.append((f"layers.{layer}.{j}", hi - lo))
    return out


def _model_dtype(m: ModelSpec, conv: Convention, nominal_bytes: int, elements: int, name: str) -> str:
    """The convention's weight dtype, which `elements` must fill `nominal_bytes` with."""
    dtype = file_dtype(m, conv, "model")
    if elements * DTYPE_BYTES[dtype] != nominal_bytes:
        raise UnknownLayout(f"model file {name}: {nominal_bytes} B is not {elements} elements of {dtype} "
                            f"(state {conv.state})")
    return dtype


def _optimizer_groups(m: ModelSpec, par: Parallelism, conv: Convention, nominal_bytes: int, name: str) -> int:
    n, small = optimizer_sizes(m, par)
    span = (n + small) * m.optimizer_bytes_per_param
    groups = conv.optimizer_groups()
    if groups * span != nominal_bytes:
        raise UnknownLayout(f"optimizer file {name}: {nominal_bytes} B is not {groups} groups of {span} B "
                            f"(state {conv.state})")
    return groups


def _scaled(pieces: list[TensorSpec], nbytes: int, prefix: str) -> tuple[TensorSpec, ...]:
    """The pieces shrunk in proportion to fill exactly `nbytes` (module docstring); empty tensors dropped."""
    nominal = sum(p.nbytes for p in pieces)
    if nominal == nbytes:
        out = list(pieces)
    else:
        size = ELEMENT_BYTES[pieces[-1].dtype] if pieces else 1
        out = [TensorSpec(p.name, p.dtype, p.numel * nbytes // nominal) for p in pieces[:-1]] if nominal else []
        rest = nbytes - sum(p.nbytes for p in out)
        if pieces:
            out.append(TensorSpec(pieces[-1].name, pieces[-1].dtype, rest // size))
        if rest % size:
            out.append(TensorSpec("pad", PAD_DTYPE, rest % size))
    return tuple(TensorSpec(prefix + p.name, p.dtype, p.numel) for p in out if p.numel)


def _model_layers(m: ModelSpec, par: Parallelism, rank: int, files: list[CheckpointFile]) -> list[range]:
    """The layers each model file of the rank holds: the whole stage, or one layer a file (ZeRO-1/2, PP > 1)."""
    layers = stage_layers(m.num_layers, par.pipeline, par.coords(rank)[1])
    if len(files) <= 1:
        return [layers] * len(files)
    with_tensors = [range(i, i + 1) for i in layers if layer_tensors(m, i)]
    if len(with_tensors) != len(files):
        raise UnknownLayout(f"{len(files)} model files for the {len(with_tensors)} layers of rank {rank}'s stage")
    return with_tensors


def file_tensors(m: ModelSpec, par: Parallelism, rank: int, scale: float = 1.0, naming: Naming = "dlio",
                 files: list[CheckpointFile] | None = None, nominal: list[CheckpointFile] | None = None,
                 conv: Convention = DEFAULT_CONVENTION) -> list[FileTensors]:
    """The tensors of each file `rank` writes, in the order of `files` (default: `rank_files` at this scale;
    `nominal`: the same files at scale 1, default `rank_files` at scale 1), under the state convention."""
    files = rank_files(m, par, rank, scale, naming, conv) if files is None else files
    nominal = rank_files(m, par, rank, 1.0, naming, conv) if nominal is None else nominal
    pieces = set(replicated_kinds(par.zero_stage)) if conv.spread else set()
    # Paired by name: a spread piece scaled to 0 bytes is not written, so `files` may lack one of `nominal`.
    of_name = {n.name: n for n in nominal}
    pairs = [(f, of_name[f.name]) for f in files]
    models = [(f, n) for f, n in pairs if f.kind == "model" and f.kind not in pieces]
    layers = dict(zip((f.name for f, _ in models), _model_layers(m, par, rank, [n for _, n in models]), strict=True))
    out = []
    for f, n in pairs:
        if f.kind in pieces:
            out.append(FileTensors(f, _flat(m, conv, f)))
            continue
        if f.kind == "model":
            held_pieces = _model_pieces(m, par, rank, layers[f.name])
            dtype = _model_dtype(m, conv, n.nbytes, sum(e for _, e in held_pieces), f.name)
            specs = [TensorSpec(name, dtype, e) for name, e in held_pieces]
            out.append(FileTensors(f, _scaled(specs, f.nbytes, f"{f.name}/")))
            continue
        steps = _steps(m, par, rank, conv)
        moments = _scaled(_optimizer_specs(m, par, rank, conv, n), f.nbytes - sum(t.nbytes for t in steps),
                          f"{f.name}/")
        out.append(FileTensors(f, moments + tuple(replace(t, name=f"{f.name}/{t.name}") for t in steps)))
    return out


def _steps(m: ModelSpec, par: Parallelism, rank: int, conv: Convention) -> tuple[TensorSpec, ...]:
    """The optimizer's per-parameter steps the rank's file holds (module docstring), as many as the layout sized."""
    stage = par.coords(rank)[1]
    if not optimizer_step_bytes(m, par, stage, conv):
        return ()
    return tuple(TensorSpec(f"layers.{layer}.{j}.step", STEP_DTYPE, 1, scalar=True)
                 for layer, j in stage_parameters(m, par.pipeline, stage))


def _optimizer_specs(m: ModelSpec, par: Parallelism, rank: int, conv: Convention,
                     nominal: CheckpointFile) -> list[TensorSpec]:
    """Each group's partition (flat, or per parameter tensor under a per-tensor convention), then its small."""
    part, small = optimizer_sizes(m, par)
    steps = optimizer_step_bytes(m, par, par.coords(rank)[1], conv)
    groups = GROUP_NAMES[_optimizer_groups(m, par, conv, nominal.nbytes - steps, nominal.name)]
    lo = optimizer_piece(par, rank) * part
    runs = parameter_runs(m, lo, lo + part) if conv.per_tensor_optimizer() else []
    out = []
    for g in groups:
        pieces = [(f"layers.{layer}.{j}.{g}", e) for layer, j, e in runs] or [(f"{g}.partition", part)]
        out += [TensorSpec(name, m.optimizer_dtype, e) for name, e in [*pieces, (f"{g}.small", small)]]
    return out


def _flat(m: ModelSpec, conv: Convention, f: CheckpointFile) -> tuple[TensorSpec, ...]:
    """A spread piece: the file's elements as one flat tensor, and its tail bytes (< one element) as uint8."""
    dtype, elements, tail = file_elements(m, conv, f)
    specs = (TensorSpec(f"{f.name}/flat", dtype, elements), TensorSpec(f"{f.name}/pad", PAD_DTYPE, tail))
    return tuple(t for t in specs if t.numel)


def read_tensors(m: ModelSpec, par: Parallelism, writers: list[int], files: list[CheckpointFile],
                 scale: float = 1.0, naming: Naming = "dlio", conv: Convention = DEFAULT_CONVENTION
                 ) -> list[FileTensors]:
    """The tensors of `files` (what a restore reads: `points.restore_files`), found among the files of the
    ranks that wrote them (`writers`): a file's name is unique in a checkpoint, so it names its tensors."""
    planned = {p.file.name: p for r in dict.fromkeys(writers) for p in file_tensors(m, par, r, scale, naming,
                                                                                     conv=conv)}
    return [planned[f.name] for f in files]
