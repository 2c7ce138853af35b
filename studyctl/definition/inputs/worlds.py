"""The bound on a world's size: every world studyctl plans (a point's, its restart's, a subset run's full one),
and so every number that sizes one (nodes, ranks per node, TP and PP degrees)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, PositiveInt

# 2^20 ranks: several times the largest accelerator clusters built so far (about 10^5), so no real study reaches it,
# while a typo (grow_to: 2^63) is refused at once instead of being planned rank by rank.
MAX_RANKS = 1 << 20
# The sweep's axes that size a world: each value at most MAX_RANKS, and so their product (checked at expansion).
WORLD_AXES = ("nodes", "ranks_per_node", "tensor_parallel", "pipeline_parallel")


def over_max_ranks(value: int) -> str | None:
    """Why `value` is too large a world (or a part of one), or None: the one wording of the bound."""
    if value <= MAX_RANKS:
        return None
    return f"{value:,} is over the most ranks a world may have, {MAX_RANKS:,} (MAX_RANKS)"


def _within(value: int) -> int:
    problem = over_max_ranks(value)
    if problem:
        raise ValueError(problem)
    return value


Ranks = Annotated[PositiveInt, AfterValidator(_within)]
