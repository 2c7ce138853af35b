"""Plausibility of a result read from a study: the rules live in the definition (`definition.result.plausibility`),
where
the worker reaches them too (a reused shared ceiling is held to them)."""

from __future__ import annotations

from studyctl.definition.result.plausibility import MAX_GIBPS, bounded_validator, implausible

__all__ = ["MAX_GIBPS", "bounded_validator", "implausible"]
