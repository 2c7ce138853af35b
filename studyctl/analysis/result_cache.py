"""The parse cache of a study's result files: plain JSON, never code.

A study directory may come from someone else, so nothing in it may run code when read (the cache was a
pickle before). The cache is a JSON object with a format name, a version and the identity (device and
inode) of the study directory it was written for; entries are keyed by the file's path relative to the
study directory, with its mtime and size. A cache that is damaged, of another version, or written for
another directory (copied or received: a new inode) is ignored and rebuilt. json.loads builds only
dicts, lists, strings, numbers, booleans and None.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from studyctl.fsutil import atomic_write_text

CACHE_FORMAT = "studyctl-results-cache"
# 4 was the pickle; 6: the attempt number and names are checked too; 7: one cost row per point; 8: tier_fstype
CACHE_VERSION = 8
TABLE = "__rows__"  # marks packed table rows (no column of ours has this name)


def _shared_prefix(rows: Sequence[dict[str, Any]]) -> int:
    """How many leading columns every row has, in the same order and with the same value."""
    first, n = list(rows[0].items()), 0
    keyed = [list(r) for r in rows]
    for k, v in first:
        if any(len(keys) <= n or keys[n] != k or r[k] != v or type(r[k]) is not type(v)
               for keys, r in zip(keyed, rows, strict=True)):
            break
        n += 1
    return n


def pack(value: Any) -> Any:
    """Table rows (lists of dicts) store their leading columns of equal values once: a smaller, quicker cache.

    Dicts, lists and tuples are walked into their dicts only; other values are kept (JSON makes tuples lists).
    """
    if isinstance(value, dict):
        return {k: pack(v) for k, v in value.items()}
    if not isinstance(value, (list, tuple)):
        return value
    if len(value) < 2 or not all(isinstance(v, dict) for v in value):
        return [pack(v) if isinstance(v, dict) else v for v in value]
    n = _shared_prefix(value)
    common = dict(list(value[0].items())[:n])
    return {TABLE: common, "rows": [dict(list(v.items())[n:]) for v in value]}


def unpack(value: Any) -> Any:
    """The inverse of `pack`: each row is its shared columns, then its own, in their order."""
    if isinstance(value, list):
        return [unpack(v) if isinstance(v, dict) else v for v in value]
    if not isinstance(value, dict):
        return value
    if TABLE not in value:
        return {k: unpack(v) for k, v in value.items()}
    common = value[TABLE]
    return [{**common, **rest} for rest in value["rows"]]


def _identity(study_dir: Path) -> list[int] | None:
    try:
        st = os.stat(study_dir)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _entries(raw: Any, identity: list[int] | None) -> dict[str, list[Any]]:
    """The entries of a cache written for this directory by this version, as [mtime_ns, size, value, packed
    value] (kept packed too: saving does not pack what did not change); {} for anything else."""
    if not isinstance(raw, dict) or raw.get("format") != CACHE_FORMAT or raw.get("version") != CACHE_VERSION:
        return {}
    if identity is None or raw.get("study_dir") != identity or not isinstance(raw.get("entries"), dict):
        return {}
    entries: dict[str, list[Any]] = raw["entries"]
    try:
        for key, value in entries.items():
            if not (isinstance(key, str) and isinstance(value, list) and len(value) == 3
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:2])):
                return {}
            value.append(value[2])
            value[2] = unpack(value[2])
    except (KeyError, TypeError, ValueError, AttributeError):  # damaged packing
        return {}
    return entries


class ParseCache:
    """relative path → [mtime_ns, size, parsed value, packed value or None] (plain JSON data), under tables/.cache."""

    def __init__(self, path: Path, study_dir: Path) -> None:
        self.path = path
        self.root = study_dir
        self.identity = _identity(study_dir)
        try:
            raw = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):
            raw = None
        self.entries = _entries(raw, self.identity)
        self.used: set[str] = set()
        self.dirty = False
        self.hits = self.misses = 0

    def get_or_parse(self, path: Path, st: os.stat_result, parse: Callable[..., Any], *args: Any) -> Any:
        """The cached value for this version of the file (`st`: its stat), else parse(path, *args)."""
        key = os.path.relpath(path, self.root)
        self.used.add(key)
        hit = self.entries.get(key)
        if hit and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            self.hits += 1
            return hit[2]
        self.misses += 1
        value = parse(path, *args)
        self.entries[key] = [st.st_mtime_ns, st.st_size, value, None]
        self.dirty = True
        return value

    def save(self) -> None:
        """Write the cache if it changed; files that disappeared leave it."""
        stale = set(self.entries) - self.used
        for key in stale:
            del self.entries[key]
        if (self.dirty or stale) and self.identity is not None:
            data = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "study_dir": self.identity,
                    "entries": {k: [m, n, pack(v) if packed is None else packed]
                                for k, (m, n, v, packed) in self.entries.items()}}
            atomic_write_text(self.path, json.dumps(data, separators=(",", ":")))
