"""The tensors a training framework holds in each checkpoint file (pure): what the torch engines save.

A framework never writes raw bytes: it serializes named tensors. For every file a rank writes
(`layout.rank_files`) this module names the tensors that file holds, with their dtypes and element counts,
following the in-file layout of `tensor_layout`:

- a **model file** holds the rank's piece of every tensor of its pipeline stage (its TP block, cut again by
  ZeRO-3), layer by layer in DLIO's order; with one file per layer, that layer's pieces only;
- an **optimizer file** holds its groups (fp32 master weights when the weights are kept in a lower precision,
  Adam m, Adam v), each its partition of the flat parameter vector and the 5h small tensor every writer holds.

The file's size is the truth (one source: `rank_files`). The dtypes and group count are read off it: the
model dtype is the element size that makes the pieces fill the file, the group count the number of
(partition + small) spans that do; a file no such reading explains is a layout this module does not know,
and it says so. With `scale` < 1 every tensor shrinks in proportion (floor), the last tensor of the file
takes the rounding, and the bytes short of one element (a scaled size need not be a multiple of the element
size) are a trailing uint8 tensor, so a file's tensors always sum to its `nbytes` exactly.

Names are unique over the ranks of a checkpoint (the file name is their prefix: DLIO's names are unique in a
step directory), so torch.distributed.checkpoint saves every rank's tensors instead of deduplicating them.
"""

from __future__ import annotations

from dataclasses import dataclass

from studyctl.definition.catalog import DTYPE_BYTES, ModelSpec
from studyctl.definition.layout import CheckpointFile, Naming, Parallelism, layer_tensors, rank_files, stage_layers
from studyctl.definition.tensor_layout import held, model_shards, optimizer_sizes

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
    """One named tensor of a file: its dtype (a catalog dtype name, or uint8 for the padding) and elements."""

    name: str
    dtype: str
    numel: int

    @property
    def nbytes(self) -> int:
        return self.numel * ELEMENT_BYTES[self.dtype]


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


def _model_dtype(m: ModelSpec, nominal_bytes: int, elements: int, name: str) -> str:
    """The dtype whose size makes `elements` fill `nominal_bytes`: the model's own first, then fp32."""
    for dtype in dict.fromkeys((m.model_dtype, "fp32", *DTYPE_BYTES)):
        if elements * DTYPE_BYTES[dtype] == nominal_bytes:
            return dtype
    raise UnknownLayout(f"model file {name}: {nominal_bytes} B is no dtype's size for {elements} elements")


def _optimizer_groups(m: ModelSpec, par: Parallelism, nominal_bytes: int, name: str) -> int:
    n, small = optimizer_sizes(m, par)
    span = (n + small) * m.optimizer_bytes_per_param
    groups = nominal_bytes // span if span else 0
    if groups not in GROUP_NAMES or groups * span != nominal_bytes:
        raise UnknownLayout(f"optimizer file {name}: {nominal_bytes} B is not 2 or 3 groups of {span} B")
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
                 files: list[CheckpointFile] | None = None,
                 nominal: list[CheckpointFile] | None = None) -> list[FileTensors]:
    """The tensors of each file `rank` writes, in the order of `files` (default: `rank_files` at this scale;
    `nominal`: the same files at scale 1, default `rank_files` at scale 1)."""
    files = rank_files(m, par, rank, scale, naming) if files is None else files
    nominal = rank_files(m, par, rank, 1.0, naming) if nominal is None else nominal
    models = [(f, n) for f, n in zip(files, nominal, strict=True) if f.kind == "model"]
    layers = dict(zip((f.name for f, _ in models), _model_layers(m, par, rank, [n for _, n in models]), strict=True))
    out = []
    for f, n in zip(files, nominal, strict=True):
        if f.kind == "model":
            pieces = _model_pieces(m, par, rank, layers[f.name])
            dtype = _model_dtype(m, n.nbytes, sum(e for _, e in pieces), f.name)
            specs = [TensorSpec(name, dtype, e) for name, e in pieces]
        else:
            part, small = optimizer_sizes(m, par)
            groups = GROUP_NAMES[_optimizer_groups(m, par, n.nbytes, f.name)]
            specs = [TensorSpec(f"{g}.{what}", m.optimizer_dtype, e)
                     for g in groups for what, e in (("partition", part), ("small", small))]
        out.append(FileTensors(f, _scaled(specs, f.nbytes, f"{f.name}/")))
    return out
