"""A torch.distributed process group over the point's MPI ranks, as DCP needs one.

Rank 0 starts the rendezvous store on its host (port 0: the kernel picks a free one, so two points on one host
never race for a port) and broadcasts host and port over MPI; every rank joins with its MPI rank and size. The
host is this host's name (what MPI's processor name gives), which the other nodes of an `mpiexec` or `srun` job
reach it by; where that name resolves to no address and every rank runs on this host (a container without its own
name in its hosts file), the loopback address. MASTER_ADDR is set to it when unset, so DCP's process-based async
executor, which starts its own group in a child process, finds the same host.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import torch.distributed as dist

TIMEOUT = timedelta(minutes=30)  # a collective this late is a hung rank; the worker's own deadline is shorter


def backend(device_type: str) -> str:
    """gloo on the host; with GPUs NCCL for device tensors and gloo for DCP's host-side collectives."""
    return "cpu:gloo,cuda:nccl" if device_type == "cuda" else "gloo"


def start_group(comm: Any, device_type: str) -> None:
    """Join (once per process) the default process group of `comm`'s ranks (an mpi4py communicator)."""
    if dist.is_initialized():
        return
    rank, size = comm.Get_rank(), comm.Get_size()
    store = None
    hosts = comm.allgather(socket.gethostname())
    if rank == 0:
        host = store_host(hosts)
        store = dist.TCPStore(host, 0, size, is_master=True, timeout=TIMEOUT, wait_for_workers=False)
        where = (host, store.port)
    host, port = comm.bcast(where if rank == 0 else None, root=0)
    if store is None:
        store = dist.TCPStore(host, port, size, is_master=False, timeout=TIMEOUT)
    os.environ.setdefault("MASTER_ADDR", host)
    dist.init_process_group(backend(device_type), store=store, rank=rank, world_size=size, timeout=TIMEOUT)


def store_host(hosts: list[str]) -> str:
    """Where the ranks (their host names, rank 0's first) reach rank 0's store."""
    try:
        socket.getaddrinfo(hosts[0], None)
    except OSError:
        if set(hosts) == {hosts[0]}:
            return "127.0.0.1"
    return hosts[0]


def end_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
