"""A point's configuration: every setting of `Point` but its repetition, and facts worked out once per configuration.

A study repeats each configuration many times (a collect reads thousands of results of a few dozen
configurations); what follows from the settings alone (the layout's bytes, a cell's settings, its heaviest rank) is
the same for every repetition, so readers work it out once per configuration (`ByConfiguration`), not per result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from studyctl.definition.checkpoint.points import Point

T = TypeVar("T")
# Every field of Point but the repetition (a later field joins by itself).
FIELDS = tuple(name for name in Point.model_fields if name != "repetition")
MOST = 4096  # more configurations than a study has: a memo past it starts again rather than grow


def configuration(p: Point) -> tuple[object, ...]:
    """The point's settings but its repetition, hashable (the settings are frozen models and scalars)."""
    return tuple(getattr(p, name) for name in FIELDS)


class ByConfiguration(Generic[T]):
    """compute(point) kept per configuration: for facts that depend on the point's settings alone."""

    def __init__(self, compute: Callable[[Point], T]) -> None:
        self.compute = compute
        self.known: dict[tuple[object, ...], T] = {}
        # The last point asked about and its fact: one result's checks ask about its point several times in a
        # row, and its key (hashing and comparing the frozen settings) cost more than the lookup itself.
        self.last: tuple[Point | None, T | None] = (None, None)

    def __call__(self, p: Point) -> T:
        last, fact = self.last
        if last is p:  # a frozen point: the same object has the same settings
            return fact  # type: ignore[return-value]
        key = configuration(p)
        hit = self.known.get(key)
        if hit is None:
            if len(self.known) >= MOST:
                self.known.clear()
            hit = self.known[key] = self.compute(p)
        self.last = (p, hit)
        return hit
