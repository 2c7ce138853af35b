"""Checkpoint layout: which rank writes which files, of what size (pure, DLIO-exact).

Rules (shared notes `checkpoint-model.md`): rank r has tp = r mod TP, pp = (r // TP) mod PP,
dp = r // (TP·PP). TP splits every matrix and the embedding/output layer by integer
division; norm vectors are replicated on each TP rank. ZeRO-3 further splits every tensor
by DP. The optimizer holds 3 groups of n elements (master, Adam m, Adam v) plus 3·5h small
tensors, n = N // (DP·MP) with ZeRO >= 1, else N // MP.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from studyctl.spec.catalog import ModelSpec

OPTIMIZER_GROUPS = 3  # fp32 master weights, Adam m, Adam v
OPTIMIZER_SMALL_TENSOR_FACTOR = 5  # DLIO adds 3 tensors of 5h elements; kept for exact agreement


@dataclass(frozen=True)
class Parallelism:
    tensor: int
    pipeline: int
    data: int
    zero_stage: int

    @property
    def model_parallel(self) -> int:
        return self.tensor * self.pipeline

    @property
    def world_size(self) -> int:
        return self.tensor * self.pipeline * self.data

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(tp, pp, dp) coordinates of a rank; TP varies fastest."""
        return rank % self.tensor, (rank // self.tensor) % self.pipeline, rank // self.model_parallel


@dataclass(frozen=True)
class CheckpointFile:
    name: str
    nbytes: int
    kind: str  # "model" or "optimizer"


@dataclass(frozen=True)
class LayoutSummary:
    """Per-checkpoint totals; bytes are nominal (unscaled) unless `scale` < 1."""

    num_parameters: int
    total_bytes: int
    model_bytes: int
    optimizer_bytes: int
    files_per_checkpoint: int
    bytes_per_rank_max: int
    bytes_per_rank_min: int  # over all ranks, non-writers (0 B) included
    writer_ranks: int
    max_files_per_rank: int
    largest_file_bytes: int


def num_parameters(m: ModelSpec) -> int:
    """DLIO's parameter count: untied embeddings, gated MLP, GQA, no biases."""
    h, f = m.hidden_size, m.ffn_hidden_size
    per_layer = h + h * (h + 2 * m.kv_dim) + h * h + h + 2 * f * h + f * h
    return m.vocab_size * h + m.num_layers * per_layer + h + m.vocab_size * h


def layout_problems(m: ModelSpec, world_size: int, tp: int, pp: int, zero_stage: int) -> list[str]:
    """Why a layout cannot run (empty list when it can); never raises."""
    out = list(m.problems())
    if tp < 1 or pp < 1 or world_size < 1:
        out.append("tensor_parallel, pipeline_parallel and world size must be >= 1")
        return out
    if zero_stage not in (0, 1, 2, 3):
        out.append(f"zero_stage {zero_stage} is not one of 0, 1, 2, 3")
    if world_size % (tp * pp):
        out.append(
            f"world size {world_size} is not a multiple of tensor_parallel×pipeline_parallel "
            f"= {tp}×{pp} = {tp * pp}"
        )
    if zero_stage == 3 and pp > 1:
        out.append("ZeRO-3 with pipeline_parallel > 1 is not a real configuration "
                   "(DeepSpeed and DLIO reject it)")
    if m.num_layers >= 1 and pp > m.num_layers:
        out.append(f"pipeline_parallel {pp} exceeds num_layers {m.num_layers}: a stage would hold no layer")
    if m.num_attention_heads >= 1 and m.num_attention_heads % tp:
        out.append(f"tensor_parallel {tp} does not divide num_attention_heads {m.num_attention_heads}")
    return out


def stage_layers(num_layers: int, pp: int, stage: int) -> range:
    """Layer indices of a pipeline stage: 0 = embedding, 1..L transformer, L+1 head, L+2 norm."""
    nl, rem = divmod(num_layers, pp)
    start = stage * (nl + 1) + 1 if stage < rem else rem * (nl + 1) + (stage - rem) * nl + 1
    end = start + (nl + 1 if stage < rem else nl)  # exclusive
    if stage == 0:
        start = 0
    if stage == pp - 1:
        end = num_layers + 3
    return range(start, end)


def layer_elements(m: ModelSpec, layer: int, tp: int, shard: int) -> int:
    """Elements of one layer index held by one rank (tp split, then ZeRO-3 shard)."""
    h, f, v = m.hidden_size, m.ffn_hidden_size, m.vocab_size
    if layer in (0, m.num_layers + 1):  # embedding, output layer
        return v * h // tp // shard
    if layer == m.num_layers + 2:  # final norm
        return h // shard
    tensors = (
        h // shard,  # input norm (replicated over TP)
        h * (h + 2 * m.kv_dim) // tp // shard,  # QKV
        h * h // tp // shard,  # attention out
        h // shard,  # post-attention norm
        2 * f * h // tp // shard,  # gated MLP up + gate
        f * h // tp // shard,  # MLP down
    )
    return sum(tensors)


def _scaled(nbytes: int, scale: float) -> int:
    return nbytes if scale >= 1 else max(1, int(nbytes * scale)) if nbytes else 0


def _optimizer_bytes(m: ModelSpec, par: Parallelism) -> int:
    n = num_parameters(m) // (par.world_size if par.zero_stage >= 1 else par.model_parallel)
    small = OPTIMIZER_SMALL_TENSOR_FACTOR * m.hidden_size
    return OPTIMIZER_GROUPS * (n + small) * m.optimizer_bytes_per_param


def rank_files(m: ModelSpec, par: Parallelism, rank: int, scale: float = 1.0) -> list[CheckpointFile]:
    """Files `rank` writes per checkpoint, DeepSpeed names (step directory not included)."""
    _, pp, dp = par.coords(rank)
    mp = rank % par.model_parallel
    zero = par.zero_stage
    wb = m.model_bytes_per_param
    layers = stage_layers(m.num_layers, par.pipeline, pp)
    optim = CheckpointFile(
        f"zero_pp_rank_{dp}_mp_rank_{mp:02d}_optim_states.pt",
        _scaled(_optimizer_bytes(m, par), scale), "optimizer",
    )
    if zero == 3:
        nbytes = sum(layer_elements(m, i, par.tensor, par.data) for i in layers) * wb
        model = CheckpointFile(f"zero_pp_rank_{dp}_mp_rank_{mp:02d}_model_states.pt",
                               _scaled(nbytes, scale), "model")
        return [model, optim]
    if dp != 0:  # ZeRO 0: only DP replica 0 writes; ZeRO 1/2: others write optimizer shards
        return [] if zero == 0 else [optim]
    if zero == 0:
        nbytes = sum(layer_elements(m, i, par.tensor, 1) for i in layers) * wb
        model = CheckpointFile(f"zero_pp_rank_0_mp_rank_{mp:02d}_model_states.pt",
                               _scaled(nbytes, scale), "model")
        return [model, optim]
    if par.pipeline == 1:
        nbytes = sum(layer_elements(m, i, par.tensor, 1) for i in layers) * wb
        return [CheckpointFile(f"mp_rank_{mp:02d}_model_states.pt", _scaled(nbytes, scale), "model"), optim]
    files = [
        CheckpointFile(f"layer_{i:02d}-model_{mp:02d}-model_states.pt",
                       _scaled(layer_elements(m, i, par.tensor, 1) * wb, scale), "model")
        for i in layers
    ]
    return [*files, optim]


@lru_cache(maxsize=4096)
def summarize(m: ModelSpec, par: Parallelism, scale: float = 1.0) -> LayoutSummary:
    """Totals without enumerating every rank: ranks differ only by stage and by dp == 0."""
    per_stage_dp0 = []
    per_stage_other = []
    for stage in range(par.pipeline):
        rank_dp0 = stage * par.tensor  # tp = 0 of this stage, dp = 0
        per_stage_dp0.append(rank_files(m, par, rank_dp0, scale))
        per_stage_other.append(rank_files(m, par, rank_dp0 + par.model_parallel, scale)
                               if par.data > 1 else [])
    total = model = optim = files = 0
    rank_bytes: list[int] = []
    writers = 0
    max_files = 0
    largest = 0
    for group, count in ((per_stage_dp0, par.tensor), (per_stage_other, par.tensor * (par.data - 1))):
        if count == 0:
            continue
        for stage_files in group:
            nbytes = sum(f.nbytes for f in stage_files)
            total += nbytes * count
            model += sum(f.nbytes for f in stage_files if f.kind == "model") * count
            optim += sum(f.nbytes for f in stage_files if f.kind == "optimizer") * count
            files += len(stage_files) * count
            rank_bytes.append(nbytes)
            writers += count if stage_files else 0
            max_files = max(max_files, len(stage_files))
            largest = max([largest, *(f.nbytes for f in stage_files)])
    return LayoutSummary(
        num_parameters=num_parameters(m),
        total_bytes=total,
        model_bytes=model,
        optimizer_bytes=optim,
        files_per_checkpoint=files,
        bytes_per_rank_max=max(rank_bytes),
        bytes_per_rank_min=min(rank_bytes),
        writer_ranks=writers,
        max_files_per_rank=max_files,
        largest_file_bytes=largest,
    )
