"""A resource shape: what a ceiling is a property of (ceiling points).

Two points of one shape run on the same nodes, ranks per node, filesystem, I/O mode and block size, so the
storage, network and memory they could reach are the same, whatever model, ZeRO stage or strategy they
checkpoint. Ceiling points are measured once per shape; every cell of that shape is judged against them.
"""

from __future__ import annotations

from dataclasses import dataclass

from studyctl.definition.checkpoint.points import Point


@dataclass(frozen=True, order=True)
class Shape:
    nodes: int
    ranks_per_node: int
    filesystem: str
    io_mode: str
    block_mib: int

    @property
    def key(self) -> str:
        """Stable and readable: file names, table columns and joins use it."""
        return (f"{self.filesystem}-{self.io_mode}-n{self.nodes}x{self.ranks_per_node}-b{self.block_mib}m")


def shape_of(point: Point) -> Shape:
    return Shape(point.nodes, point.ranks_per_node, point.filesystem, point.io_mode, point.checkpoint.block_mib)
