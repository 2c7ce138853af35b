"""A real training job on this machine's CPU against studyctl's engine points of its layout (`engines_check`).

    python -m benchmarks engines_cpu [repeat]

The job: a GPT-2-shaped model of GPT-2 XL's depth and heads (48 layers, 25 heads) at hidden size 200 (33.4 M
parameters, 382 MiB of fp32 weights + Adam m, v), batch 1 x 16 tokens, fp32 (no AMP) and fused AdamW, one
intra-op thread: a step of ~0.35 s of CPU time here. Checkpointed with torch.save, DCP save, DCP async_save (the
default stager; shared memory + async staging) beside its steps, restored cold. studyctl runs the same layout
(`state: torch`, ZeRO 0, one rank, `device: cpu`) with `compute: cpu` and the job's idle step.

Why `compute: cpu` stands for "a node training on its CPU": the job's step occupies a core for all of its time
(kernels on the intra-op thread, Python dispatch between them), which is what `cpu` models (a busy loop on a core
that releases the GIL); `accelerator` models a step whose device part holds no core, which a CPU job does not
have. What `cpu` leaves out: the job's dispatch holds the GIL between its kernels, so a persist thread that runs
Python (DCP's writer, per tensor) takes turns with it; the table shows what that costs.
Every figure depends on this machine: 2 cores shared with other work (load printed), one virtio disk.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import engines_check


def main(repeat: int = 2, out: Path | None = None) -> None:
    print(f"\n## A real CPU training job's checkpoints vs studyctl (`python -m benchmarks engines_cpu {repeat}`)")
    engines_check.main(repeat, "cpu", out)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2, Path(sys.argv[2]) if len(sys.argv) > 2 else None)
