"""How a point's id is built: the hash of its canonical form (the same configuration is the same point across
runs, so submit and resubmit are idempotent).

A setting added after points were first hashed is left out of the canonical form while at its default, so the
points of studies run before it keep their ids. That rule is one marker on the field (`later`), read the same way
for the point's own fields and its checkpoint options (`later_defaults`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonDict

OMIT_AT_DEFAULT: JsonDict = {"omit_at_default": True}
ID_HEX_DIGITS = 12


def later(default: Any, **kwargs: Any) -> Any:
    """A field added after points were first hashed: out of a point's identity at its default."""
    return Field(default, json_schema_extra=OMIT_AT_DEFAULT, **kwargs)


def is_later(field: FieldInfo) -> bool:
    extra = field.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("omit_at_default"))


def later_defaults(model: type[BaseModel]) -> dict[str, object]:
    """The fields of `model` marked `later`, with the default at which they leave the canonical form."""
    return {name: f.default for name, f in model.model_fields.items() if is_later(f)}


def canonical_id(canonical_json: str) -> str:
    """The id of a canonical form (`Point.canonical_json`): the first hex digits of its SHA-256."""
    return hashlib.sha256(canonical_json.encode()).hexdigest()[:ID_HEX_DIGITS]
