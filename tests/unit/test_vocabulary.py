"""One checkpoint vocabulary: every word-list field of the result schema and of a point's options is a type of
`definition.inputs.vocabulary`, never a Literal restated where it is used (a restated list drifts: a restore mode the
options accept but the schema lacks makes every result of that mode unusable at collect).

The check walks the models' own annotations (as written: the modules use postponed annotations), from the result
and error records down through every nested model, and from the point down through its options.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel

from studyctl.definition.checkpoint.points import CheckpointOptions, Point
from studyctl.definition.inputs import vocabulary
from studyctl.definition.result.result_schema import Result, WorkerError

WORDS = {name for name, value in vars(vocabulary).items() if get_origin(value) is Literal}
# Their own fields (the point's model, recovery and step are other topics, walked from no schema model: the schema
# walk stops at the point, whose options are checked here).
POINT_OPTIONS = (Point, CheckpointOptions)


def models(root: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> Iterator[type[BaseModel]]:
    """`root` and every model its fields hold (in lists, dicts, unions), each once."""
    seen = set() if seen is None else seen
    if root in seen:
        return
    seen.add(root)
    yield root
    for f in root.model_fields.values():
        for inner in _types(f.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel) and inner is not Point:
                yield from models(inner, seen)


def _types(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in get_args(annotation):
        yield from _types(arg)


def has_literal(annotation: Any) -> bool:
    return any(get_origin(t) is Literal for t in _types(annotation))


def written(model: type[BaseModel], field: str) -> tuple[str, str]:
    """(the field's annotation as written, the module that wrote it): the class that declared it, first in the MRO."""
    for cls in model.__mro__:
        if field in vars(cls).get("__annotations__", {}):
            text = cls.__annotations__[field]
            return (text if isinstance(text, str) else repr(text)), cls.__module__
    raise AssertionError(f"{model.__name__}.{field}: no annotation")


def restated(text: str) -> list[str]:
    """Literal subscripts written in an annotation (`Literal[...]`, `typing.Literal[...]`)."""
    return [ast.unparse(node) for node in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Literal"]


def word_fields(roots: tuple[type[BaseModel], ...]) -> list[tuple[type[BaseModel], str]]:
    out = []
    for root in roots:
        for model in models(root):
            out += [(model, name) for name, f in model.model_fields.items() if has_literal(f.annotation)]
    return out


SCHEMA_FIELDS = word_fields((Result, WorkerError))
OPTION_FIELDS = [(m, n) for m in POINT_OPTIONS for n, f in m.model_fields.items() if has_literal(f.annotation)]


@pytest.mark.parametrize(("model", "field"), SCHEMA_FIELDS + OPTION_FIELDS,
                         ids=lambda x: x.__name__ if isinstance(x, type) else x)
def test_a_word_list_field_uses_the_vocabulary(model: type[BaseModel], field: str) -> None:
    text, where = written(model, field)
    assert not restated(text), \
        f"{model.__name__}.{field}: {text} restates a word list; use definition.inputs.vocabulary"
    names = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
    module = sys.modules[where]
    used = {n for n in names if n in WORDS and getattr(module, n, None) is getattr(vocabulary, n)}
    assert used, f"{model.__name__}.{field}: {text} names no type of definition.inputs.vocabulary"


def test_the_walk_finds_the_schema_word_fields() -> None:
    """The walk reaches nested models: the restore mode both where the I/O and where the strategy records it."""
    found = {(m.__name__, f) for m, f in SCHEMA_FIELDS}
    assert {("IoInfo", "restore_mode"), ("StrategyInfo", "restore_mode"), ("CheckpointTiming", "phase"),
            ("EngineInfo", "engine"), ("RecoveryTiming", "launcher"), ("Result", "schema_version")} <= found
    assert ("CheckpointOptions", "restore") in {(m.__name__, f) for m, f in OPTION_FIELDS}


def test_a_restated_literal_fails_the_check() -> None:
    """The check can fail: a field written as a Literal list, even one equal to the vocabulary's, is found."""
    class Restating(BaseModel):
        restore_mode: Literal["rank", "full", "broadcast"]  # the restatement the check must catch

    text, _ = written(Restating, "restore_mode")
    assert restated(text) and has_literal(Restating.model_fields["restore_mode"].annotation)


def test_the_options_and_the_schema_agree_word_for_word() -> None:
    """A restore mode, strategy, drain, I/O mode, engine the options accept is one the schema records."""
    opts = CheckpointOptions.model_fields
    assert get_args(opts["restore"].annotation) == get_args(vocabulary.RestoreMode)
    assert set(get_args(opts["engine"].annotation)) - {"stream"} == set(get_args(vocabulary.FrameworkEngine))
