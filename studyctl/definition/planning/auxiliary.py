"""Points a study adds beside the ones its matrix asks for: a ceiling per resource shape (ceiling points,
`definition.planning.ceilings`) and calibration runs at larger scales (`definition.planning.calibration`).

Each kind sees every planned point as it streams past (plan streams a million points without holding them),
then makes its own; their orders follow the measure points' and one another's, so no two points share one.
A new kind is one more entry in `_kinds`: expansion, plan and capacity all take their points from here.

They are the study's own business, derived from the measure points: a change of those may add, keep or
supersede some of them, and they never decide whether a sweep is the same study (`study.same_study`). Where
the free space of the filesystems is known (`free_bytes`: plan, submit), calibration lowers its scales to fit it;
an added point that still does not fit where it would run is left out with a line (`definition.planning.fit_added`),
never
the study refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from studyctl.definition.planning.calibration import CalibrationSources
from studyctl.definition.planning.ceilings import CeilingSources
from studyctl.definition.planning.planned import PlannedPoint

if TYPE_CHECKING:
    from studyctl.definition.planning.sweep import SweepFile


class AuxiliaryKind(Protocol):
    def add(self, pp: PlannedPoint) -> None: ...
    def points(self, first_order: int) -> list[PlannedPoint]: ...


# free bytes per filesystem name, where they were read (None: not read)
FreeBytes = Mapping[str, int | None]


def _kinds(sweep: SweepFile, free_bytes: FreeBytes | None) -> list[AuxiliaryKind]:
    return [CeilingSources(sweep), CalibrationSources(sweep, free_bytes)]


def with_auxiliary(sweep: SweepFile, planned: Iterable[PlannedPoint], free_bytes: FreeBytes | None = None
                   ) -> Iterator[PlannedPoint]:
    """`planned` streamed through, then every auxiliary kind's points, in order after them."""
    kinds = _kinds(sweep, free_bytes)
    next_order = 0
    for pp in planned:
        for kind in kinds:
            kind.add(pp)
        next_order = max(next_order, pp.order + 1)
        yield pp
    for kind in kinds:
        made = kind.points(next_order)
        next_order += len(made)
        yield from made


def auxiliary_points(sweep: SweepFile, planned: Sequence[PlannedPoint]) -> list[PlannedPoint]:
    """The auxiliary points of an expansion held in full (`expand`)."""
    return list(with_auxiliary(sweep, planned))[len(planned):]
