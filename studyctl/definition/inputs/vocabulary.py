"""The checkpoint vocabulary: every word a point's options and a result's fields choose from, declared once.

The point options (`points`, `engine_options`, `layout`) and the result schema (`result_schema`, `result_fields`)
import these types; neither restates a word list, so a value the options accept is one a result may record (a
restore mode missing from the schema would make every result of that mode unusable at collect).
Imports nothing of the project: the floor every other module of the definition stands on.
"""

from __future__ import annotations

from typing import Literal

# How a rank's files are written and read: through the page cache, O_DIRECT, or O_DIRECT with a buffered tail.
IoMode = Literal["buffered", "direct", "hybrid"]
# How a restore avoids the page cache, as asked (auto: chosen by the I/O mode) ...
ColdRead = Literal["auto", "direct", "fadvise", "none"]
# ... and as done (no_cache: an object store, whose client keeps no cache: every restored byte comes from the server).
ColdReadMethod = Literal["direct", "fadvise", "none", "no_cache"]
# What a restore reads: each rank its own files (DLIO's); every DP replica the states replicas share too (full); or
# one replica of each group reads those and broadcasts them (broadcast). `restore_rules` says what each one reads.
RestoreMode = Literal["rank", "full", "broadcast"]
# When training gets back to work: after every file is written (sync), after a host-memory snapshot (async), after
# a node-local tier write that is drained to shared storage in the background (tiered).
Strategy = Literal["sync", "async", "tiered"]
DrainBy = Literal["rank", "node"]  # tiered: every rank drains its own files, or one drainer per node
Naming = Literal["dlio", "deepspeed"]  # file and folder names written: DLIO's exactly, or DeepSpeed's
Phase = Literal["write", "read"]  # a checkpoint written, or restored
# What a point is for: a measurement the study asked for; a ceiling of its resource shape (what the storage,
# network and memory of that shape reach, measured the same way); a calibration point at a larger scale that
# projections to full size are fitted from. Only "measure" points are the study's cells.
PointRole = Literal["measure", "ceiling", "calibration"]
# How a rank's checkpoint reaches storage: raw bytes from one reused buffer (stream), or a framework's own path
# over real tensors: one torch.save per DLIO file, or torch.distributed.checkpoint (DCP) over the point's ranks.
FrameworkEngine = Literal["torch_save", "dcp"]
Engine = Literal["stream", FrameworkEngine]
StateDevice = Literal["cpu", "cuda"]  # where an engine's tensors live
DcpExecutor = Literal["thread", "process"]  # DCP async_save's executor
StateConvention = Literal["megatron", "torch"]  # what the state holds per parameter (14 B or 12 B)
ReplicatedWriter = Literal["dp0", "spread"]  # who writes the states DP replicas share
Launcher = Literal["mpiexec", "srun"]  # what started a restart's world
# How a background strategy's simulated training step computes: after its dispatch share (GIL and a core), on an
# accelerator (no core held) or in kernels on the host's CPU (a core held, the GIL released).
ComputeModel = Literal["accelerator", "cpu"]
SchemaVersion = Literal[1]  # the result and error files' format
