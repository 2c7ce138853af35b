"""Which ranks share a node, and where each node's local tier is.

Nodes are Slurm's (SLURMD_NODENAME) or, under mpiexec on one machine, groups of `ranks_per_node`
ranks; either way every rank learns the same node numbering from one allgather.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studyctl.definition.checkpoint.places import Place
from studyctl.definition.checkpoint.points import WorkerTask
from worker import provenance


@dataclass
class NodeMap:
    comm: Any  # this node's ranks
    index: int  # this node's number, 0-based in sorted node-name order
    count: int
    name: str
    ranks: list[int]  # world ranks on this node, ascending

    @property
    def leader(self) -> bool:
        return self.comm.Get_rank() == 0


def node_map(comm: Any, ranks_per_node: int) -> NodeMap:
    rank = comm.Get_rank()
    name, _ = provenance.node_name(rank, ranks_per_node)
    names = comm.allgather(name)
    order = sorted(set(names))
    index = order.index(name)
    node_comm = comm.Split(color=index, key=rank)
    return NodeMap(node_comm, index, len(order), name, [r for r, n in enumerate(names) if n == name])


def dir_name(node: str) -> str:
    """A node name as one path component ("host:1" → "host-1")."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", node)


def tier_place(task: WorkerTask, node: str) -> Place:
    """The point's place on this node's tier ("{node}" in the tier path: Slurm's node name, else `node`)."""
    tier = task.places[-1]
    assert tier.node_local, "a tier place exists only for a tiered point"
    return tier.on_node(os.environ.get("SLURMD_NODENAME") or dir_name(node))


def tier_point_dir(task: WorkerTask, node: str) -> Path:
    """This node's directory for this point on the tier, named as on shared storage (`<study>.<key>/<point>`)
    plus the node."""
    return tier_place(task, node).path / dir_name(node)
