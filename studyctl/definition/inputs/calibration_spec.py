"""The sweep's `calibration:` block (what it adds: `studyctl.definition.planning.calibration`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PositiveInt


class CalibrationSpec(BaseModel):
    """The sweep's `calibration:` block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="false: no calibration points (projections fall back to plain scaling)")
    below_scale: float = Field(0.05, gt=0, le=1, description="shapes measured only below this scale calibrate")
    max_scale: float = Field(0.1, gt=0, le=1, description="the largest scale a calibration point runs at")
    scales: PositiveInt = Field(2, le=8, description="extra scales per shape")
    repetitions: PositiveInt = Field(2, description="runs of each calibration scale (at most the study's repetitions)")
    budget_share: float = Field(1.0, gt=0, le=10, description="estimated run time of all calibration points "
                                "together, as a share of the measure points' estimated run time")
    budget_s: float | None = Field(None, gt=0, description="the same as seconds (instead of budget_share)")
    min_budget_s: float = Field(300.0, ge=0, description="with budget_share: the least estimated run time calibration "
                                "may spend (a study of small points would otherwise afford no larger run at all)")
    max_disk_gib: float = Field(8.0, gt=0, description="disk one calibration point may need (its scale lowered)")


def _on_off(value: Any) -> Any:
    """`calibration: off` (YAML's false, or the word quoted) or `on`, like `ceilings:`; a block sets the details."""
    if isinstance(value, str) and value.strip().lower() in ("on", "off"):
        value = value.strip().lower() == "on"
    if isinstance(value, bool):
        return {"enabled": value}
    if not isinstance(value, dict | CalibrationSpec):
        raise ValueError(f"allowed: on, off, or a block of {', '.join(CalibrationSpec.model_fields)}")
    return value


# The sweep's `calibration:` (studyctl.definition.planning.sweep).
CalibrationSetting = Annotated[CalibrationSpec, BeforeValidator(_on_off)]
