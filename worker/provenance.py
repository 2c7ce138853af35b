"""Where and with what a result was measured: hosts, Slurm ids, versions (filesystem and mount: studyctl.host)."""

from __future__ import annotations

import os
import platform
import time

from studyctl.definition.result.result_schema import SlurmInfo


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


def process_start_epoch() -> float | None:
    """When this process started (epoch seconds, to the kernel's clock tick), from /proc/self/stat."""
    try:
        stat = open("/proc/self/stat").read()  # noqa: SIM115 - one read of a proc file
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime: ticks since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - age


def usable_cores() -> frozenset[int]:
    """The cores this process may run on (its CPU affinity: the allocation under Slurm's cgroups)."""
    return frozenset(os.sched_getaffinity(0))


def host_sharing(ranks: list[tuple[str, frozenset[int], int]]) -> tuple[int, int, int]:
    """From every rank's (host, usable cores, background threads): the cores of the smallest host (the
    union of its ranks' affinities), and the most ranks and background threads on any one host."""
    hosts: dict[str, tuple[set[int], int, int]] = {}
    for host, cores, threads in ranks:
        union, count, bg = hosts.setdefault(host, (set(), 0, 0))
        union |= cores
        hosts[host] = (union, count + 1, bg + threads)
    return (min(len(c) for c, _, _ in hosts.values()), max(n for _, n, _ in hosts.values()),
            max(t for _, _, t in hosts.values()))
