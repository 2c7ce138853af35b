"""YAML loading that remembers where each key and item sits, for `file:line:` errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from studyctl.errors import UserError

Loc = tuple[str | int, ...]
# A sweep file is a few hundred lines: bound what a hostile or broken one can cost before anything is built.
MAX_FILE_BYTES = 1 << 20
MAX_NODES = 100_000  # YAML nodes after aliases are expanded (an anchor bomb expands exponentially)
MAX_DEPTH = 64


class _NoDuplicatesLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML says keys are unique; PyYAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in seen:
                raise _DuplicateKey(key, seen[key], line)
            if isinstance(key, str | int | float | bool):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(key)
        self.key, self.first, self.again = key, first, again


class _RecursiveAlias(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def _expanded_size(node: yaml.Node) -> tuple[int, int]:
    """(nodes, depth) of the document as it would be built, aliases expanded; linear in the YAML's own size."""
    memo: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()  # nodes whose children are being sized: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in memo:
            continue
        children = _children(current)
        if not children_done:
            if id(current) in open_:
                raise _RecursiveAlias(current.start_mark.line + 1)
            open_.add(id(current))
            stack.append((current, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        open_.discard(id(current))
        sizes = [memo.get(id(c), (1, 1)) for c in children]
        memo[id(current)] = (min(1 + sum(s for s, _ in sizes), MAX_NODES + 1),
                             1 + max((d for _, d in sizes), default=0))
    return memo[id(node)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _index(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    out.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            here = (*loc, key_node.value)
            out[here] = key_node.start_mark.line + 1
            _index(value_node, here, out)
            out[here] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, (*loc, i), out)


def load_yaml_with_lines(path: Path) -> tuple[Any, dict[Loc, int]]:
    """Parse `path`; return the data and a map from key paths to 1-based line numbers."""
    text = _read_text(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _check_size(path, node)
        data = yaml.load(text, Loader=_NoDuplicatesLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: invalid YAML: {problem}") from None
    except _DuplicateKey as dup:
        raise UserError(f"{path}:{dup.again}: {dup.key}: key given twice (first on line {dup.first}); "
                        "YAML keys must be unique") from None
    except _RecursiveAlias as rec:
        raise UserError(f"{path}:{rec.line}: invalid YAML: an alias refers to the node that contains it") from None
    except RecursionError:
        raise UserError(f"{path}: invalid YAML: nested deeper than {MAX_DEPTH} levels") from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _index(node, (), lines)
    return data, lines


def _read_text(path: Path) -> str:
    try:
        if path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
            raise UserError(f"{path}: {path.stat().st_size} bytes; a sweep file is at most {MAX_FILE_BYTES} bytes")
        if not path.is_file():
            raise UserError(f"{path}: not a regular file" if path.exists() else f"{path}: no such file")
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (not UTF-8); a sweep file is YAML text") from None
    if "\0" in text:
        raise UserError(f"{path}: not a text file (NUL bytes); a sweep file is YAML text")
    return text


def _check_size(path: Path, node: yaml.Node) -> None:
    nodes, depth = _expanded_size(node)
    if depth > MAX_DEPTH:
        raise UserError(f"{path}: invalid YAML: nested deeper than {MAX_DEPTH} levels")
    if nodes > MAX_NODES:
        raise UserError(f"{path}: invalid YAML: more than {MAX_NODES} values once aliases (*anchors) are "
                        "expanded; write the values out or use fewer aliases")


def load_yaml_bounded(path: Path) -> Any:
    """The data of a YAML file read from a results directory (a sweep copy, DLIO's config): the same bounds
    as a sweep file (size, aliases, depth, duplicate keys), so a received directory cannot exhaust memory.
    UserError when the file is missing, too large or not YAML."""
    return load_yaml_with_lines(path)[0]


def line_of(lines: dict[Loc, int], loc: Loc) -> int | None:
    """Line of the deepest known prefix of `loc`."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
