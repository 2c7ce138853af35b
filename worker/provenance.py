"""Where and with what a result was measured: hosts, Slurm ids, versions (filesystem and mount: studyctl.host)."""

from __future__ import annotations

import os
import platform

from studyctl.definition.result_schema import SlurmInfo


def slurm_info() -> SlurmInfo | None:
    env = os.environ
    if "SLURM_JOB_ID" not in env:
        return None
    return SlurmInfo(job_id=env.get("SLURM_JOB_ID"), array_job_id=env.get("SLURM_ARRAY_JOB_ID"),
                     array_task_id=env.get("SLURM_ARRAY_TASK_ID"),
                     nodelist=env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST"),
                     cluster=env.get("SLURM_CLUSTER_NAME"), partition=env.get("SLURM_JOB_PARTITION"))


def node_name(rank: int, ranks_per_node: int) -> tuple[str, bool]:
    """(node name, simulated?): Slurm's node name, else this host split into rank groups."""
    if os.environ.get("SLURMD_NODENAME"):
        return os.environ["SLURMD_NODENAME"], False
    return f"{platform.node()}:{rank // ranks_per_node}", True


def versions() -> dict[str, str]:
    import mpi4py
    from mpi4py import MPI

    import studyctl

    return {
        "python_version": platform.python_version(),
        "mpi4py_version": mpi4py.__version__,
        "mpi_library_version": MPI.Get_library_version().strip().splitlines()[0],
        "kernel": platform.release(),
        "studyctl_version": studyctl.__version__,
    }
