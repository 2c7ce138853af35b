"""Point statuses handed in by the caller (the ledger's view); analysis never reads the ledger itself."""

from __future__ import annotations

from dataclasses import dataclass

from studyctl.states import EXCLUDED


@dataclass(frozen=True)
class PointStatus:
    """The ledger's view of one point, for the report's coverage section."""

    point_id: str
    state: str  # a studyctl.states.State value, or EXCLUDED
    attempts: int = 0
    failure_reason: str | None = None  # latest attempt's reason, for failed states
    excluded_reason: str | None = None  # set for points the planner excluded
    resubmit_command: str | None = None  # default: studyctl sweep resubmit <study> --point <id>
    label: str = ""  # short config, e.g. "llama_7b ZeRO-1 2×4 lustre buffered rep 0"
    role: str = "measure"  # the point's role: measure, or one a study adds itself (ceiling, calibration)

    @property
    def excluded(self) -> bool:
        return self.state == EXCLUDED or self.excluded_reason is not None
