"""Checkpoint layout: which rank writes which files, of what size (pure, DLIO-exact).

Rules (docs/checkpoint-model.md): rank r has tp = r mod TP, pp = (r // TP) mod PP,
dp = r // (TP·PP). TP splits every matrix and the embedding/output layer by integer
division; norm vectors are replicated on each TP rank. ZeRO-3 further splits every tensor
by DP. The optimizer holds 3 groups of n elements (master, Adam m, Adam v) plus 3·5h small
tensors, n = N // (DP·MP) with ZeRO >= 1, else N // MP.

Conventions (`Convention`): `state` megatron is the above, 14 B/param with DLIO's dtypes (bf16 weights + fp32
master, Adam m, v: Megatron, DeepSpeed ZeRO-1/2); `state` torch is 12 B/param (fp32 weights + Adam m, v: PyTorch
AMP, FSDP2, DeepSpeed ZeRO-3): model files hold the weights at the optimizer's bytes per element and the
optimizer holds 2 groups (m, v), each still with DLIO's 5h small elements. `replicated_writer` dp0 is DLIO's and
DeepSpeed's (DP replica 0 writes what every replica holds, `replicated_kinds`); spread is Megatron's fully
parallel save: each such file is cut evenly over the DP ranks of its model-parallel rank (bytes // DP each, the
first bytes % DP ranks one byte more, so totals stay exact; a piece of 0 bytes is not written), DP rank d
writing its piece as `zero_pp_rank_{d}_` + the file's name (a name that already starts with DeepSpeed's
`zero_pp_rank_{d}_`, ZeRO 0's, keeps it).

Optimizer steps (`optimizer_step_bytes`): torch.optim keeps a `step` per parameter, a 0-dim fp32 tensor, that
DLIO's sizes have no room for; a real AdamW checkpoint holds one per parameter tensor, and DCP pays per tensor.
So under state torch each optimizer file grows by 4 B per parameter tensor its rank holds a piece of: every
tensor of its pipeline stage (`stage_parameters`; TP holds a block of each, ZeRO-3 a shard, as FSDP keeps a step
per local shard), under every ZeRO stage, whatever part of the flat vector the file's moments cover. The steps
are not scaled (a smaller run has as many parameters), so at `scale` < 1 the file is its scaled moments plus
4 B a step. Under ZeRO 0 with spread the optimizer file, steps included, is cut into DP pieces like any shared
file. State megatron holds none (DeepSpeed and Megatron keep one step per parameter group, in DLIO's small
tensors), so its files, DLIO's, are unchanged.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from studyctl.definition.checkpoint.model_tensors import layer_elements, layer_tensors, stage_layers, stage_parameters
from studyctl.definition.inputs.catalog import ARCHITECTURE_DEFAULTS, DTYPE_BYTES, ModelSpec
from studyctl.definition.inputs.vocabulary import Naming as Naming  # where the layout's callers have long found them
from studyctl.definition.inputs.vocabulary import ReplicatedWriter as ReplicatedWriter
from studyctl.definition.inputs.vocabulary import StateConvention as StateConvention

OPTIMIZER_GROUPS = 3  # fp32 master weights, Adam m, Adam v
OPTIMIZER_SMALL_TENSOR_FACTOR = 5  # DLIO adds 3 tensors of 5h elements; kept for exact agreement
STEP_DTYPE = "fp32"  # torch.optim's per-parameter `step`: one 0-dim fp32 tensor (module docstring)
STEP_BYTES = DTYPE_BYTES[STEP_DTYPE]


# What each state convention keeps per parameter: (weights at the optimizer's precision, optimizer groups, its
# optimizer state one tensor per parameter tensor as torch.optim keeps it rather than in flat partitions).
STATE_CONVENTIONS: dict[str, tuple[bool, int, bool]] = {"megatron": (False, OPTIMIZER_GROUPS, False),
                                                        "torch": (True, 2, True)}
PIECE_PREFIX = "zero_pp_rank_{dp}_"


@dataclass(frozen=True)
class Convention:
    """What a checkpoint holds per parameter (`state`) and who writes what DP replicas share (`replicated_writer`);
    the default is DLIO's, so every figure without one is today's (module docstring)."""

    state: StateConvention = "megatron"
    replicated_writer: ReplicatedWriter = "dp0"

    @property
    def spread(self) -> bool:
        return self.replicated_writer == "spread"

    def optimizer_groups(self) -> int:
        return STATE_CONVENTIONS[self.state][1]

    def per_tensor_optimizer(self) -> bool:
        """Whether the optimizer file holds its state one tensor per parameter tensor (`engine_tensors`), as
        torch.optim does, with a `step` per parameter (`optimizer_step_bytes`)."""
        return STATE_CONVENTIONS[self.state][2]

    def weight_dtype(self, m: ModelSpec) -> str:
        """The catalog dtype of the weights in model files: the model's, or the optimizer's under state torch."""
        return m.optimizer_dtype if STATE_CONVENTIONS[self.state][0] else m.model_dtype


DEFAULT_CONVENTION = Convention()


def replicated_kinds(zero_stage: int) -> tuple[str, ...]:
    """File kinds every data-parallel replica holds a copy of (DP replica 0 writes them, or all write a piece)."""
    return ("model", "optimizer") if zero_stage == 0 else ("model",) if zero_stage < 3 else ()


def file_dtype(m: ModelSpec, conv: Convention, kind: str) -> str:
    """The catalog dtype (`catalog.DTYPE_BYTES`) of a file's tensors: weights by the convention, optimizer fp32."""
    return conv.weight_dtype(m) if kind == "model" else m.optimizer_dtype


def file_elements(m: ModelSpec, conv: Convention, f: CheckpointFile) -> tuple[str, int, int]:
    """(dtype, elements, tail bytes) that fill a file exactly: its size at a `scale` < 1 or a spread piece's need
    not be a whole number of elements, so the last `tail` bytes (< one element) are raw bytes."""
    dtype = file_dtype(m, conv, f.kind)
    elements, tail = divmod(f.nbytes, DTYPE_BYTES[dtype])
    return dtype, elements, tail


@dataclass(frozen=True)
class Parallelism:
    """TP × PP × DP with a ZeRO stage; `running` < world_size is MLPerf's subset mode: only the first
    `running` ranks of the full run exist and write their share (0: all ranks run)."""

    tensor: int
    pipeline: int
    data: int
    zero_stage: int
    running: int = 0

    @property
    def model_parallel(self) -> int:
        return self.tensor * self.pipeline

    @property
    def world_size(self) -> int:
        """Ranks of the full run the checkpoint is sized for."""
        return self.tensor * self.pipeline * self.data

    @property
    def ranks(self) -> int:
        """Ranks that run and write."""
        return self.running or self.world_size

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
    files_per_checkpoint: int
    bytes_per_rank_max: int
    bytes_per_rank_min: int  # over all ranks, non-writers (0 B) included
    writer_ranks: int


@lru_cache(maxsize=1024)
def num_parameters(m: ModelSpec) -> int:
    """Every element of every layer, unsplit: DLIO's count for its models (untied, gated MLP, GQA, no
    biases), the real count for GPT-2/GPT-3-style ones."""
    return sum(layer_elements(m, i, 1, 1) for i in range(m.num_layers + 3))


def layout_problems(m: ModelSpec, world_size: int, tp: int, pp: int, zero_stage: int,
                    subset_of: int | None = None) -> list[str]:
    """Why a layout cannot run (empty list when it can); never raises. `subset_of`: the full run's world
    size when only `world_size` of its ranks run (MLPerf subset mode)."""
    out = list(m.problems())
    if tp < 1 or pp < 1 or world_size < 1:
        out.append("tensor_parallel, pipeline_parallel and world size must be >= 1")
        return out
    if subset_of is not None:
        if subset_of < world_size:
            out.append(f"checkpoint.subset_world_size {subset_of} is smaller than the {world_size} ranks that run")
        world_size = subset_of
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


def optimizer_step_bytes(m: ModelSpec, par: Parallelism, stage: int, conv: Convention) -> int:
    """Bytes of the `step` tensors in an optimizer file of a rank of `stage` (module docstring), at any scale."""
    return STEP_BYTES * len(stage_parameters(m, par.pipeline, stage)) if conv.per_tensor_optimizer() else 0


def _scaled(nbytes: int, scale: float) -> int:
    return nbytes if scale >= 1 else max(1, int(nbytes * scale)) if nbytes else 0


def _optimizer_bytes(m: ModelSpec, par: Parallelism, conv: Convention) -> int:
    n = num_parameters(m) // (par.world_size if par.zero_stage >= 1 else par.model_parallel)
    small = OPTIMIZER_SMALL_TENSOR_FACTOR * m.hidden_size
    return conv.optimizer_groups() * (n + small) * m.optimizer_bytes_per_param


def step_dir_name(index: int, naming: Naming = "dlio") -> str:
    """The directory of the index-th checkpoint (0-based): DLIO counts steps from 1 in epoch 1."""
    return f"global_epoch1_step{index + 1}" if naming == "dlio" else f"global_step{index}"


def _names(naming: Naming, dp: int, mp: int) -> dict[str, str]:
    """File names by role; DLIO's are DeepSpeed's with unpadded ranks and '_' before model_states."""
    m = str(mp) if naming == "dlio" else f"{mp:02d}"
    sep = "_" if naming == "dlio" else "-"
    return {
        "optimizer": f"zero_pp_rank_{dp}_mp_rank_{m}_optim_states.pt",
        "sharded": f"zero_pp_rank_{dp}_mp_rank_{m}_model_states.pt",
        "model": f"model_{m}_model_states.pt" if naming == "dlio" else f"mp_rank_{m}_model_states.pt",
        "layer": "layer_{i}-model_" + m + sep + "model_states.pt" if naming == "dlio"
        else "layer_{i:02d}-model_" + m + sep + "model_states.pt",
    }


def rank_files(m: ModelSpec, par: Parallelism, rank: int, scale: float = 1.0,
               naming: Naming = "dlio", conv: Convention = DEFAULT_CONVENTION) -> list[CheckpointFile]:
    """Files `rank` writes per checkpoint (step directory not included)."""
    _, pp, dp = par.coords(rank)
    files = _replica_files(m, par, pp, dp, rank % par.model_parallel, scale, naming, conv)
    if par.zero_stage == 3 or (dp == 0 and not conv.spread):
        return files
    kinds = replicated_kinds(par.zero_stage)
    if not conv.spread:  # ZeRO 0: only DP replica 0 writes; ZeRO 1/2: others write optimizer shards
        return [f for f in files if f.kind not in kinds]
    pieces = [_piece(f, dp, par.data) if f.kind in kinds else f for f in files]
    return [f for f in pieces if f.nbytes]


def _piece(f: CheckpointFile, dp: int, parts: int) -> CheckpointFile:
    """DP rank `dp`'s piece of a file its replica group shares (`replicated_writer` spread)."""
    size, rem = divmod(f.nbytes, parts)
    prefix = PIECE_PREFIX.format(dp=dp)
    return CheckpointFile(f.name if f.name.startswith(prefix) else prefix + f.name, size + (dp < rem), f.kind)


def _replica_files(m: ModelSpec, par: Parallelism, pp: int, dp: int, mp: int, scale: float, naming: Naming,
                   conv: Convention) -> list[CheckpointFile]:
    """What DP replica 0 of a model-parallel rank writes under dp0, named for DP rank `dp`."""
    zero = par.zero_stage
    wb = DTYPE_BYTES[conv.weight_dtype(m)]
    names = _names(naming, dp, mp)
    layers = stage_layers(m.num_layers, par.pipeline, pp)
    optim = CheckpointFile(names["optimizer"], _scaled(_optimizer_bytes(m, par, conv), scale)
                           + optimizer_step_bytes(m, par, pp, conv), "optimizer")
    if zero == 3:
        nbytes = sum(layer_elements(m, i, par.tensor, par.data) for i in layers) * wb
        return [CheckpointFile(names["sharded"], _scaled(nbytes, scale), "model"), optim]
    if zero == 0 or par.pipeline == 1:
        nbytes = sum(layer_elements(m, i, par.tensor, 1) for i in layers) * wb
        return [CheckpointFile(names["sharded" if zero == 0 else "model"], _scaled(nbytes, scale), "model"), optim]
    files = [
        CheckpointFile(names["layer"].format(i=i), _scaled(layer_elements(m, i, par.tensor, 1) * wb, scale), "model")
        for i in layers if layer_tensors(m, i)  # a tied output layer has no file of its own
    ]
    return [*files, optim]


def replica_files(m: ModelSpec, par: Parallelism, mp: int, scale: float = 1.0, naming: Naming = "dlio",
                  conv: Convention = DEFAULT_CONVENTION) -> list[CheckpointFile]:
    """The files of the states a model-parallel rank's DP replicas share (`replicated_kinds`), as written: DP
    replica 0's whole files, or with spread every running DP rank's piece (what a full restore reads)."""
    kinds = replicated_kinds(par.zero_stage)
    if not kinds:
        return []
    holders = range(mp, par.ranks, par.model_parallel) if conv.spread else (mp,)
    return [f for rank in holders for f in rank_files(m, par, rank, scale, naming, conv) if f.kind in kinds]


def disk_steps_needed(writes: int, reads: int, keep: bool = False) -> int:
    """Step directories on disk at the peak: the ones restores read, plus one being written (all with keep)."""
    if writes == 0 or keep:
        return writes
    kept = min(writes, reads)
    return kept + (1 if writes > kept else 0)


def rank_classes(par: Parallelism) -> list[tuple[int, int]]:
    """(a representative rank, how many running ranks write what it writes).

    Ranks differ only by pipeline stage and by being in DP replica 0 or not, so planning never
    enumerates the ranks of a 16,384-rank run; subset mode counts only the ranks that run.
    """
    full, rem = divmod(par.ranks, par.model_parallel)
    counts: dict[tuple[int, bool], int] = {}
    for r in range(par.model_parallel):
        replicas = full + (1 if r < rem else 0)  # running ranks with this model-parallel rank
        stage = (r // par.tensor) % par.pipeline
        if replicas:
            counts[(stage, True)] = counts.get((stage, True), 0) + 1
        if replicas > 1:
            counts[(stage, False)] = counts.get((stage, False), 0) + replicas - 1
    return [(stage * par.tensor + (0 if first else par.model_parallel), n) for (stage, first), n in counts.items()]


@lru_cache(maxsize=4096)
def spread_cuts(m: ModelSpec, par: Parallelism, stage: int, scale: float, conv: Convention) -> tuple[int, ...]:
    """The DP indices where a stage's ranks start writing other sizes: 0, 1 (replica 0 alone, as `rank_classes`
    keeps it) and, with spread, each shared file's bytes % DP (the ranks below it write one byte more)."""
    cuts = {0, 1}
    if conv.spread:
        whole = rank_files(m, par, stage * par.tensor, scale, "dlio", replace(conv, replicated_writer="dp0"))
        kinds = replicated_kinds(par.zero_stage)
        cuts |= {f.nbytes % par.data for f in whole if f.kind in kinds}
    return tuple(sorted(c for c in cuts if c < par.data))


def rank_key(m: ModelSpec, par: Parallelism, scale: float, conv: Convention) -> Callable[[int], tuple[int, int]]:
    """rank → (model-parallel rank, its DP range's start): ranks of one key write files of the same sizes."""
    cuts = {stage: spread_cuts(m, par, stage, scale, conv) for stage in range(par.pipeline)}

    def key(rank: int) -> tuple[int, int]:
        mp, stage, dp = rank % par.model_parallel, par.coords(rank)[1], par.coords(rank)[2]
        starts = cuts[stage]
        return mp, starts[bisect_right(starts, dp) - 1]
    return key


@lru_cache(maxsize=4096)
def write_classes(m: ModelSpec, par: Parallelism, scale: float = 1.0, conv: Convention = DEFAULT_CONVENTION
                  ) -> tuple[tuple[int, int], ...]:
    """`rank_classes` under a convention: (a representative rank, how many running ranks write what it writes).
    With spread a stage's DP ranks split further where their pieces' sizes change (`spread_cuts`)."""
    if not conv.spread or par.zero_stage == 3:
        return tuple(rank_classes(par))
    full, rem = divmod(par.ranks, par.model_parallel)
    counts: dict[tuple[int, int], int] = {}
    for r in range(par.model_parallel):
        replicas = full + (1 if r < rem else 0)  # running ranks with this model-parallel rank: dp 0..replicas-1
        stage = (r // par.tensor) % par.pipeline
        starts = spread_cuts(m, par, stage, scale, conv)
        for start, stop in zip(starts, (*starts[1:], par.data), strict=True):
            n = min(stop, replicas) - start
            if n > 0:
                counts[(stage, start)] = counts.get((stage, start), 0) + n
    # tp 0 of a stage has the most replicas, so its rank at a range's start runs whenever any in the range does
    return tuple((stage * par.tensor + par.model_parallel * start, n) for (stage, start), n in counts.items())


@lru_cache(maxsize=4096)
def summarize(m: ModelSpec, par: Parallelism, scale: float = 1.0, conv: Convention = DEFAULT_CONVENTION
              ) -> LayoutSummary:
    """Totals over the ranks that run, one representative rank per class."""
    total = model = files = writers = 0
    rank_bytes: list[int] = []
    for rank, count in write_classes(m, par, scale, conv):
        stage_files = rank_files(m, par, rank, scale, conv=conv)
        nbytes = sum(f.nbytes for f in stage_files)
        total += nbytes * count
        model += sum(f.nbytes for f in stage_files if f.kind == "model") * count
        files += len(stage_files) * count
        rank_bytes.append(nbytes)
        writers += count if stage_files else 0
    return LayoutSummary(
        num_parameters=num_parameters(m),
        total_bytes=total,
        model_bytes=model,
        files_per_checkpoint=files,
        bytes_per_rank_max=max(rank_bytes),
        bytes_per_rank_min=min(rank_bytes),
        writer_ranks=writers,
    )


def dlio_reported_bytes(m: ModelSpec, par: Parallelism) -> int:
    """The checkpoint size DLIO would report for these dimensions: its own architecture (gated MLP, untied,
    no biases), and under ZeRO-2 the weights of every DP replica though only replica 0 writes them."""
    dlio_model = replace(m, **ARCHITECTURE_DEFAULTS)  # type: ignore[arg-type]
    lay = summarize(dlio_model, par)
    if par.zero_stage != 2:
        return lay.total_bytes
    return lay.total_bytes + lay.model_bytes * (par.data - 1)
