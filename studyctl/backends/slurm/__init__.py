"""Slurm backend: submitit job arrays, one batched sacct per refresh, crash recovery by job name."""

from studyctl.backends.slurm.backend import SlurmBackend, array_ids
from studyctl.backends.slurm.discovery import FoundJob, find_jobs, job_name
from studyctl.backends.slurm.submit import cluster_max_array_size, sbatch_message, shape_of, time_limit_min
from studyctl.backends.slurm.verdict import NEVER_SUBMITTED_AFTER_S, VANISHED_AFTER_S, final_update

__all__ = ["NEVER_SUBMITTED_AFTER_S", "VANISHED_AFTER_S", "FoundJob", "SlurmBackend", "array_ids",
           "cluster_max_array_size", "final_update", "find_jobs", "job_name", "sbatch_message", "shape_of",
           "time_limit_min"]
