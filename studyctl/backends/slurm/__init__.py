"""Slurm backend: submitit job arrays, one batched sacct per refresh, crash recovery by job name."""

from studyctl.backends.slurm.backend import (
    VANISHED_AFTER_S,
    SlurmBackend,
    array_ids,
    cluster_max_array_size,
    final_update,
    find_jobs,
    sbatch_message,
    shape_of,
    time_limit_min,
)

__all__ = ["VANISHED_AFTER_S", "SlurmBackend", "array_ids", "cluster_max_array_size", "final_update",
           "find_jobs", "sbatch_message", "shape_of", "time_limit_min"]
