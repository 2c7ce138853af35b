"""Execution backends: `local` (mpiexec on this machine) and `slurm` (submitit job arrays)."""
