"""What the machines offer before a study runs: free space per filesystem, memory per host.

I/O, so it lives here and not in definition/ (which only compares numbers). Each backend knows where
its hosts' memory is written down: the local backend's simulated nodes share this machine; a
Slurm node's memory is its RealMemory as Slurm reports it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from studyctl.definition.plan import Capacity
from studyctl.definition.sweep import SweepFile
from studyctl.units import MIB


def free_space(path: str) -> tuple[int | None, str]:
    """Free bytes (for unprivileged users) at `path`, or at its nearest existing parent if not made yet."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return None, str(probe)
    if st.f_blocks == 0:  # ramfs, some FUSE: no capacity reported
        return None, str(probe)
    return st.f_bavail * st.f_frsize, str(probe)


def this_machine_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def slurm_node_memory(partition: str | None) -> tuple[int | None, str]:
    """The smallest RealMemory (MiB) of the partition's nodes, from sinfo; None when sinfo cannot say."""
    where = f"the smallest node of partition {partition}" if partition else "the smallest node of the cluster"
    cmd = ["sinfo", "-h", "-N", "-o", "%m"] + (["-p", partition] if partition else [])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{where} (sinfo failed: {exc})"
    values = [int(v.rstrip("+")) for v in proc.stdout.split() if v.rstrip("+").isdigit()]
    if proc.returncode != 0 or not values:
        return None, f"{where} (sinfo: {proc.stderr.strip() or 'no nodes'})"
    return min(values) * MIB, f"Slurm RealMemory of {where}"


def probe(sweep: SweepFile, backend: str) -> Capacity:
    free: dict[str, int | None] = {}
    where: dict[str, str] = {}
    for name, fs in sweep.filesystems.items():
        free[name], where[name] = free_space(fs.path)
    if backend == "slurm":
        memory, source = slurm_node_memory(sweep.slurm.partition)
        return Capacity(free, where, memory, source)
    return Capacity(free, where, this_machine_memory(), "this machine", hosts_share_one_machine=True)
