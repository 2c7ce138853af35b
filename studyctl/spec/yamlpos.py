"""YAML loading that remembers where each key and item sits, for `file:line:` errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from studyctl.errors import UserError

Loc = tuple[str | int, ...]


def _index(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    out.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            out[(*loc, key)] = key_node.start_mark.line + 1
            _index(value_node, (*loc, key), out)
            out[(*loc, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, (*loc, i), out)


def load_yaml_with_lines(path: Path) -> tuple[Any, dict[Loc, int]]:
    """Parse `path`; return the data and a map from key paths to 1-based line numbers."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: invalid YAML: {problem}") from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _index(node, (), lines)
    return data, lines


def line_of(lines: dict[Loc, int], loc: Loc) -> int | None:
    """Line of the deepest known prefix of `loc`."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
