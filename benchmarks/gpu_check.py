"""The GPU check: a real GPT-2 training job's checkpoints on a GPU against studyctl's engine points of its layout.

    OUT=dir MODEL=xl|large|tiny bash benchmarks/gpu_check.sh      (the environment; it runs this module)
    python -m benchmarks.gpu_check OUT SHAPE SCRATCH [WRITES]

The real job (`benchmarks.real_training`): GPT-2 XL-shaped (or `large`: 36 layers x 1280, where the disk is slow
or small) trained with AMP bf16 + fused AdamW on the GPU, checkpointed with torch.save, DCP save, DCP async_save
(default stager; pinned + shared + async staging) beside its steps, restored cold to the GPU. studyctl then runs
the same layout on the same disk (`device: cuda`, `state: torch`, ZeRO 0, one rank; `compute: accelerator` with
the job's idle step, its GPU part real matmuls). One checkpoint a point: the XL state is 17.7 GiB and its async
persist near a minute on the H200 machine's disk, so one round takes ~8 minutes there. Without a GPU (MODEL=tiny)
it is the same comparison on host tensors in seconds: the test that this script works.
Targets: sync save and restore ±10%, async blocking and persist ±15%, interference ±30%.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks import engines_check


def main(out: Path, shape: str, scratch: Path, writes: int = 1) -> None:
    """`writes` checkpoints a point (and as many rounds of the real job's): a job's first checkpoint pays for fresh
    host pages, its later ones do not, and one sample a figure cannot say which the two sides measured."""
    print(f"\n## GPU check: a real training job's checkpoints vs studyctl ({shape}, {writes} a point)", flush=True)
    engines_check.main(1, shape, out, scratch, writes=writes)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), *(int(a) for a in sys.argv[4:5]))
