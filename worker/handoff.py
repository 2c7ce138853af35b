"""What the writing world of a recovery point leaves for the restart world (`worker.restart`).

Its checkpoint files stay (the restart restores them and removes them). Its node-local tier stays only where
the restart runs in the same shape (`same`, `lost_nodes`); the `lost_nodes` last nodes lose theirs now, off
the restart's clock, as nodes replaced after a failure (a resharded restart reads shared storage only).
"""

from __future__ import annotations

from typing import Any

from studyctl.definition.checkpoint.points import Point


def keeps(point: Point) -> tuple[bool, bool]:
    """(keep the checkpoint files, keep the node-local tier) when the writing world ends."""
    recovery = point.recovery
    if point.checkpoint.keep or recovery is None:
        return point.checkpoint.keep, point.checkpoint.keep
    return True, recovery.scenario in ("same", "lost_nodes")


def lose_tiers(point: Point, ck: Any) -> None:
    """Node leaders of the last `lost_nodes` nodes remove their tier copies (`ck`: the run's Checkpointing)."""
    recovery = point.recovery
    if recovery is not None and recovery.lost_nodes and ck.restorer is not None:
        ck.restorer.replace_nodes(ck.nodes, recovery.lost_nodes)
