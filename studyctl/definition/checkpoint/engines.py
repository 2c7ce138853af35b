"""What a checkpoint engine writes and holds, planned before anything runs (pure, but for asking whether torch is
importable): its files per checkpoint, the memory its ranks' real tensors take, and the refusal of an engine
point where torch is missing.

An engine (`checkpoint.engine` torch_save or dcp) writes through the framework a training run uses, from real
tensors of the layout's dtypes and sizes (`layout.file_elements`). torch_save keeps DLIO's file set: one
`torch.save` per file, DLIO's names. dcp writes torch.distributed.checkpoint's own set (torch 2.13,
`FileSystemWriter` with one file per rank): every rank of the process group writes `dcp_threads` files
`__{rank}_{i}.distcp` (the writer's buckets, balanced by size; a rank with fewer tensors than threads, or none,
still writes every file, some empty), and the coordinator one `.metadata`.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from typing import Any

from studyctl.definition.checkpoint.layout import LayoutSummary, Parallelism, rank_files, rank_key
from studyctl.definition.checkpoint.points import CheckpointOptions, restore_files
from studyctl.definition.inputs.catalog import ModelSpec

TORCH_EXTRA = "pip install 'studyctl[torch]'"
DCP_METADATA = ".metadata"
DCP_SUFFIX = ".distcp"


# What an engine writes beyond its tensors' bytes, at most (torch 2.13, measured in tests/integration/test_engines):
# per file the archive's own records; per tensor torch.save's zip entry (~320 B) or DCP's record (~1.5 KiB) and its
# `.metadata` entry (~300 B). A DCP restore reads `.metadata` on every rank.
ENGINE_FILE_FRAMING = 4096
ENGINE_TENSOR_FRAMING = 2048
METADATA_PER_TENSOR = 1024


def engine_framing_bytes(phase: str, files: int, tensors_per_rank: int, ranks: int) -> int:
    """The most bytes a checkpoint (or restore) of an engine moves beyond its tensors' bytes, all ranks."""
    tensors = tensors_per_rank * ranks
    framing = ENGINE_FILE_FRAMING * files + (ENGINE_TENSOR_FRAMING + METADATA_PER_TENSOR) * tensors
    if phase == "read":  # every rank reads the whole `.metadata`
        framing += ranks * (ENGINE_FILE_FRAMING + METADATA_PER_TENSOR * tensors)
    return framing


def engine_io_problems(io_mode: str, opts: CheckpointOptions) -> tuple[str, ...]:
    """torch.save and DCP write and read through the page cache: an engine point asking for O_DIRECT would be
    measured buffered under a direct label, so it is infeasible (one line) rather than silently relabelled."""
    if opts.engine == "stream" or io_mode == "buffered":
        return ()
    return (f"checkpoint.engine {opts.engine} with io_mode {io_mode}: torch.save and DCP write through the page "
            "cache; engine points run io_mode buffered (O_DIRECT is a stream setting)",)


def dcp_file_names(rank: int, threads: int) -> list[str]:
    """The `.distcp` files one rank writes per checkpoint (FileSystemWriter's `__{rank}_{i}` prefix and count)."""
    return [f"__{rank}_{i}{DCP_SUFFIX}" for i in range(threads)]


def engine_files_per_checkpoint(opts: CheckpointOptions, ranks: int, layout: LayoutSummary) -> int:
    """Files a checkpoint of `ranks` running ranks has: DLIO's set (stream, torch_save) or DCP's."""
    if opts.engine == "dcp":
        return ranks * opts.dcp_threads + 1
    return layout.files_per_checkpoint


ENGINE_LABELS = {"engine": "{}", "device": "{}", "state": "state {}", "replicated_writer": "{}"}


def engine_label(opts: CheckpointOptions) -> str:
    """The engine, device, state convention and replicated writer where not the defaults: "dcp, state torch"."""
    fields = type(opts).model_fields
    return ", ".join(text.format(getattr(opts, key)) for key, text in ENGINE_LABELS.items()
                     if getattr(opts, key) != fields[key].default)


def engine_files_label(opts: CheckpointOptions) -> str:
    """How the plan names an engine's file set, e.g. `__{rank}_{0..3}.distcp + .metadata`."""
    if opts.engine == "dcp":
        threads = "0" if opts.dcp_threads == 1 else f"{{0..{opts.dcp_threads - 1}}}"
        return f"__{{rank}}_{threads}{DCP_SUFFIX} + {DCP_METADATA}"
    if opts.engine == "torch_save":
        return "DLIO's, a torch.save each"
    return "DLIO's"


@lru_cache(maxsize=4096)
def engine_tensor_bytes(m: ModelSpec, par: Parallelism, ranks_per_node: int, opts: CheckpointOptions) -> int:
    """The most bytes of real tensors the ranks of one host hold (rank r on host r // ranks_per_node; one host of
    every rank gives a point's whole need): each rank's state (its files' bytes), a host copy of it with strategy
    async (torch.save's snapshot clone, DCP's stager), and the state its restores allocate (the files it reads).
    0 for stream, which holds one reused buffer (`strategies.memory_per_host_bytes`). With device cuda the state
    sits on the GPU, but each engine copies it to the host to serialize it: counted on the host all the same."""
    if opts.engine == "stream":
        return 0
    conv, copies = opts.convention, 2 if opts.strategy == "async" else 1
    key = rank_key(m, par, opts.scale, conv)
    unshifted = opts.model_copy(update={"rank_shift": 0})
    written: dict[tuple[int, int], int] = {}
    restored: dict[tuple[int, int], int] = {}

    def rank_bytes(rank: int) -> int:
        k, source = key(rank), (rank + opts.rank_shift) % par.ranks
        ks = key(source)
        if k not in written:
            written[k] = sum(f.nbytes for f in rank_files(m, par, rank, opts.scale, opts.naming, conv))
        if ks not in restored:
            restored[ks] = sum(f.nbytes for f in restore_files(m, par, source, unshifted)) if opts.reads else 0
        return copies * written[k] + restored[ks]

    hosts = -(-par.ranks // ranks_per_node)
    return max(sum(rank_bytes(r) for r in range(h * ranks_per_node, min(par.ranks, (h + 1) * ranks_per_node)))
               for h in range(hosts))


def engines_named(sweep: Any) -> list[str]:
    """The engines a sweep's points use: its `checkpoint.engine`, or the values a matrix or zip gives it."""
    values = [*(sweep.matrix.engine or [sweep.checkpoint.engine])]
    for group in sweep.zip:
        values += group.get("engine", [])
    return list(dict.fromkeys(str(v) for v in values))


def engine_refusal(sweep: Any) -> str | None:
    """Why this Python cannot run the sweep's engine points (None: it can, or none asks for an engine)."""
    engines = [e for e in engines_named(sweep) if e != "stream"]
    if not engines or importlib.util.find_spec("torch") is not None:
        return None
    return (f"{sweep.where}: checkpoint.engine {', '.join(engines)} needs torch, which this Python cannot import; "
            f"install the extra ({TORCH_EXTRA}) or use engine stream; nothing was started")
