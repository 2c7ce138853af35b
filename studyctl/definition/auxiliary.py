"""Points a study adds beside the ones its matrix asks for: a ceiling per resource shape (issue 18,
`definition.ceilings`) and calibration runs at larger scales (issue 21, `definition.calibration`).

Each kind sees every planned point as it streams past (plan streams a million points without holding them),
then makes its own; their orders follow the measure points' and one another's, so no two points share one.
A new kind is one more entry in `_kinds`: expansion, plan and capacity all take their points from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from studyctl.definition.calibration import CalibrationSources
from studyctl.definition.ceilings import CeilingSources
from studyctl.definition.planned import PlannedPoint

if TYPE_CHECKING:
    from studyctl.definition.sweep import SweepFile


class AuxiliaryKind(Protocol):
    def add(self, pp: PlannedPoint) -> None: ...
    def points(self, first_order: int) -> list[PlannedPoint]: ...


def _kinds(sweep: SweepFile) -> list[AuxiliaryKind]:
    return [CeilingSources(sweep), CalibrationSources(sweep)]


def with_auxiliary(sweep: SweepFile, planned: Iterable[PlannedPoint]) -> Iterator[PlannedPoint]:
    """`planned` streamed through, then every auxiliary kind's points, in order after them."""
    kinds = _kinds(sweep)
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
