"""The sweep's `ceilings:` setting (ceiling points; what it adds: `studyctl.definition.planning.ceilings`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

# auto: ceilings for a study of a few shapes (definition.planning.ceilings.AUTO_MAX_SHAPES); off: none; on: always;
# shared: like on, but a completed ceiling of the same shape, filesystem path and nodes in another study of the
# same results root is reused (worker.ceiling_shared).
CeilingsMode = Literal["auto", "on", "off", "shared"]


def _on_off(value: Any) -> Any:
    """YAML reads a bare on / off as true / false."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


# The sweep's `ceilings:` (studyctl.definition.planning.sweep).
CeilingsSetting = Annotated[CeilingsMode, BeforeValidator(_on_off)]
