"""The parse cache of a study's result files: plain JSON in shards, never code.

A study directory may come from someone else, so nothing in it may run code when read (the cache was a
pickle before): JSON parsers build only dicts, lists, strings, numbers, booleans and None. Entries are keyed
by the file's path relative to the study directory, with its mtime and size, and spread over SHARDS files by a
stable hash of that key, so a collect after one file changed rewrites one shard, not the whole cache. Each
shard names its format, version, number and the identity (device and inode) of the study directory it was
written for; a shard that is damaged, of another version or layout, holds a key of another shard, or was
written for another directory (copied or received: a new inode) is ignored and rebuilt. `results.json` names
the layout for a reader; the shards beside it are `results.<n>.json`. Shards are written by orjson (ten times
quicker than json); it would write NaN or ±inf as null, so a shard holding one is written by json instead
(exact round trip), and read back by json when orjson refuses it. Only regular files are read.

With a `Split`, each value's bulky part (a result's checkpoint and rank rows: three quarters of the bytes) is kept
apart, in `results.<n>.heavy.json`, and read only for the entries `complete` is asked for: a collect after one
change needs the rest of every result, but the bulky rows of only the changed one (the others are in the kept
per-point frames). An entry whose bulky part is missing, damaged or of another version of its file is parsed
again from its file.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import orjson

from studyctl.analysis.cache_values import Packed, Split, finite, from_portable, pack, portable, unpack
from studyctl.attempt.tree import read_regular
from studyctl.fsutil import atomic_write_bytes

CACHE_FORMAT = "studyctl-results-cache"
# 4 was the pickle; 6: the attempt number and names are checked too; 7: one cost row per point; 8: tier_fstype;
# 9: sharded; 10: per-rank split and files, ceiling rows, the heaviest rank's files; 11: restarts after a failure;
# 12: object store requests; 13: the point's resource shape; 14: a rank's missing split is null, not NaN;
# 15: the engine section (checkpoint engines); 16: an engine point's cost row carries its per-phase engine and
# storage-call seconds and its staged time; 18: a ceiling row says how its probe read and wrote, a restore's
# checkpoint row its pages resident before the read; 19: a point's rank rows kept as JSON text, parsed where used;
# 20: the bulky rows in shards of their own, a point's checkpoint row count beside the rest; 21: a point's info says
# how its host hands memory back to a hypervisor
CACHE_VERSION = 21
SHARDS = 32
AHEAD_MIN = 256  # files to parse before worker processes pay for themselves (a fork, rows pickled back)
AHEAD_CHUNK = 128  # files per task: results stream back while the rest are parsed
HEAVY_TAG = "heavy"  # names a shard's file of bulky parts: results.<n>.heavy.json


def shard_of(key: str) -> int:
    """The shard of a relative path: stable across runs and machines (not Python's salted hash)."""
    return zlib.crc32(key.encode()) % SHARDS


def _identity(study_dir: Path) -> list[int] | None:
    try:
        st = os.stat(study_dir)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


Stored = tuple[Any, bytes | None, list[Any]]  # what a shard's entry holds after its stamp: the value (or a part),
# the bytes a worker wrote for it, and what follows it (a light part: whether its value has a bulky part)


def _parse_chunk(task: tuple[Callable[..., Any], Split | None, list[tuple[Path, tuple[Any, ...]]]]
                 ) -> list[tuple[Packed | None, Any]]:
    """In a worker process: parse(path, *args) for each file of one chunk, each as `portable` sends it."""
    parse, split, files = task
    return [portable(parse(path, *args), split) for path, args in files]


def _loads(data: bytes) -> tuple[Any, bool]:
    """(the parsed shard, whether orjson read it: then it holds no NaN or ±inf)."""
    try:
        return orjson.loads(data), True
    except orjson.JSONDecodeError:  # NaN or ±inf (written by json), or damaged
        return json.loads(data), False


def _entries(raw: Any, header: dict[str, Any], shard: int, width: int = 3) -> dict[str, list[Any]]:
    """The entries of a shard written for this directory by this version, as [mtime_ns, size, value] (and, in a
    split cache's light shard, whether the value has a bulky part); {} for anything else."""
    if not isinstance(raw, dict) or any(raw.get(k) != v for k, v in header.items()) or raw.get("shard") != shard:
        return {}
    entries = raw.get("entries")
    if not isinstance(entries, dict):
        return {}
    try:
        for key, value in entries.items():
            if not (isinstance(key, str) and shard_of(key) == shard and isinstance(value, list)
                    and len(value) == width
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:2])
                    and (width == 3 or isinstance(value[3], bool))):
                return {}
            value[2] = unpack(value[2])
    except (KeyError, TypeError, ValueError, AttributeError):  # damaged packing
        return {}
    return entries


class ParseCache:
    """relative path → [mtime_ns, size, parsed value] (plain JSON data), in shards under tables/.cache. With a
    `split`, a value read from a shard is its light part until `complete` reads its bulky part."""

    def __init__(self, path: Path, study_dir: Path, split: Split | None = None) -> None:
        self.path = path
        self.root = study_dir
        self.split = split
        self.prefix = os.path.join(study_dir, "")
        identity = _identity(study_dir)
        self.header = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "study_dir": identity, "shards": SHARDS,
                       "split": split is not None}
        self.entries: dict[str, list[Any]] = {}
        self.not_finite: set[str] = set()  # keys whose value holds NaN or ±inf: their shard is written by json
        self.partial: set[str] = set()  # keys whose value is its light part, its bulky part not read yet
        if identity is not None:
            for shard in range(SHARDS):
                loaded = self._load(self.shard_path(shard), shard, 3 if split is None else 4)
                if loaded is None:
                    continue
                entries, finite = loaded
                if split is not None:
                    self.partial.update(k for k, v in entries.items() if v.pop())
                self.entries.update(entries)
                if not finite:
                    self.not_finite.update(entries)
        self.used: set[str] = set()
        self.dirty: set[int] = set()
        self.hits = self.misses = 0
        self.ahead: dict[str, list[Any]] = {}  # parsed by `parse_ahead`, not yet asked for: [mtime_ns, size, value]
        self.packed: dict[str, Packed] = {}  # an entry's parts as its worker packed them (orjson: exact), for `save`
        # how each entry asked for was parsed: `complete` parses a file again whose bulky part is lost
        self.sources: dict[str, tuple[Path, Callable[..., Any], tuple[Any, ...]]] = {}

    def _load(self, path: Path, shard: int, width: int) -> tuple[dict[str, list[Any]], bool] | None:
        try:
            raw, finite = _loads(read_regular(path))  # a FIFO never blocks
        except (OSError, ValueError, RecursionError):
            return None
        return _entries(raw, self.header, shard, width), finite

    def key(self, path: Path) -> str:
        text = os.fspath(path)  # the tree is listed under the root: its prefix cut off is relpath's answer
        return text[len(self.prefix):] if text.startswith(self.prefix) else os.path.relpath(path, self.root)

    def cached(self, path: Path, st: os.stat_result) -> bool:
        hit = self.entries.get(self.key(path))
        return hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size

    def parse_ahead(self, jobs: Sequence[tuple[Path, os.stat_result, tuple[Any, ...]]],
                    parse: Callable[..., Any]) -> None:
        """parse(path, *args) for the jobs not cached, in worker processes (one per core) when there are enough of
        them (a first collect of a large study): `get_or_parse` then takes each value as if it parsed it there
        (counted, cached, and parsed again if the file changed meanwhile). Nothing is skipped: every file is
        parsed (validated) in full, only elsewhere. Without a second core, or if the workers fail, nothing is
        done here and `get_or_parse` parses as before."""
        stale = [(path, st, args) for path, st, args in jobs if not self.cached(path, st)]
        workers = min(len(os.sched_getaffinity(0)), -(-len(stale) // AHEAD_CHUNK))
        if len(stale) < AHEAD_MIN or workers < 2:
            return
        chunks = [stale[i:i + AHEAD_CHUNK] for i in range(0, len(stale), AHEAD_CHUNK)]
        try:  # fork: the workers share the loaded code (a fresh interpreter would import it all again)
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                tasks = [(parse, self.split, [(path, args) for path, _, args in chunk]) for chunk in chunks]
                for chunk, values in zip(chunks, pool.map(_parse_chunk, tasks), strict=True):
                    for (path, st, _), (packed, value) in zip(chunk, values, strict=True):
                        if packed is not None:
                            value = from_portable(packed, self.split)
                        self.ahead[self.key(path)] = [st.st_mtime_ns, st.st_size, value, packed]
        except (OSError, BrokenProcessPool):
            self.ahead.clear()

    def shard_path(self, shard: int) -> Path:
        return self.path.with_name(f"{self.path.stem}.{shard}{self.path.suffix}")

    def heavy_path(self, shard: int) -> Path:
        return self.path.with_name(f"{self.path.stem}.{shard}.{HEAVY_TAG}{self.path.suffix}")

    def get_or_parse(self, path: Path, st: os.stat_result, parse: Callable[..., Any], *args: Any) -> Any:
        """The cached value for this version of the file (`st`: its stat), else parse(path, *args). With a split,
        a cached value is its light part until `complete` is asked for its key."""
        key = self.key(path)
        self.used.add(key)
        self.sources[key] = (path, parse, args)
        hit = self.entries.get(key)
        if hit and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            self.hits += 1
            return hit[2]
        self.misses += 1
        self.partial.discard(key)
        ahead = self.ahead.pop(key, None)
        self.packed.pop(key, None)
        if ahead is not None and ahead[0] == st.st_mtime_ns and ahead[1] == st.st_size:
            value, packed = ahead[2], ahead[3]
        else:
            value, packed = parse(path, *args), None
        self.entries[key] = [st.st_mtime_ns, st.st_size, value]
        self.dirty.add(shard_of(key))
        if packed is not None:  # its worker found it finite and wrote it exactly
            self.packed[key] = packed
        (self.not_finite.discard if packed is not None or finite(value) else self.not_finite.add)(key)
        return value

    def complete(self, keys: Iterable[str]) -> None:
        """The values of these keys made whole in place (their bulky parts read, a shard file each); a value
        whose bulky part is missing, damaged or of another version of its file is parsed again from its file."""
        split = self.split
        wanted: dict[int, list[str]] = {}
        for key in keys:
            if key in self.partial:
                wanted.setdefault(shard_of(key), []).append(key)
        if split is None or not wanted:
            return
        for shard, shard_keys in wanted.items():
            loaded = self._load(self.heavy_path(shard), shard, 3)
            heavy = loaded[0] if loaded is not None else {}
            for key in shard_keys:
                entry, got = self.entries[key], heavy.get(key)
                if got is not None and got[:2] == entry[:2]:
                    split.join(entry[2], got[2])
                    if loaded is not None and not loaded[1]:
                        self.not_finite.add(key)
                else:
                    self._parse_again(key)
                self.partial.discard(key)

    def _parse_again(self, key: str) -> None:
        """A light part's bulky part lost: the file parsed again, its bulky part joined in (the shard is rewritten
        whole by `save`)."""
        assert self.split is not None
        path, parse, args = self.sources[key]
        _, heavy = self.split.parts(parse(path, *args))
        if heavy is None:
            raise OSError(0, "changed while it was being collected; collect again", str(path))
        self.split.join(self.entries[key][2], heavy)
        if not finite(self.entries[key][2]):
            self.not_finite.add(key)
        self.dirty.add(shard_of(key))

    def save(self) -> None:
        """Write the shards that changed; files that disappeared leave them."""
        for key in set(self.entries) - self.used:
            del self.entries[key]
            self.not_finite.discard(key)
            self.partial.discard(key)
            self.packed.pop(key, None)
            self.dirty.add(shard_of(key))
        if not self.dirty or self.header["study_dir"] is None:
            return
        shards: dict[int, list[str]] = {shard: [] for shard in self.dirty}
        for key in self.entries:
            shard = shard_of(key)
            if shard in shards:  # a shard is packed whole: 1/SHARDS of the entries after one change
                shards[shard].append(key)
        self.complete(k for keys in shards.values() for k in keys)
        for shard, keys in sorted(shards.items()):
            if self.split is None:
                whole: dict[str, Stored] = {k: (self.entries[k][2], self._bytes(k, 0), []) for k in keys}
                atomic_write_bytes(self.shard_path(shard), self._shard_bytes(shard, whole))
                continue
            light, heavy = self._parts(keys)
            # bulky parts first: a light part is never newer than the bulky part of its file's version it names
            atomic_write_bytes(self.heavy_path(shard), self._shard_bytes(shard, heavy))
            atomic_write_bytes(self.shard_path(shard), self._shard_bytes(shard, light))
        self.dirty.clear()
        self._save_head()

    def _bytes(self, key: str, part: int) -> bytes | None:
        packed = self.packed.get(key)
        return packed[part] if packed is not None else None

    def _parts(self, keys: list[str]) -> tuple[dict[str, Stored], dict[str, Stored]]:
        """Each value as its light part (and whether it has a bulky part) and its bulky part."""
        assert self.split is not None
        light: dict[str, Stored] = {}
        heavy: dict[str, Stored] = {}
        for key in keys:
            part, bulky = self.split.parts(self.entries[key][2])
            light[key] = (part, self._bytes(key, 0), [bulky is not None])
            if bulky is not None:
                heavy[key] = (bulky, self._bytes(key, 1), [])
        return light, heavy

    def _shard_bytes(self, shard: int, parts: dict[str, Stored]) -> bytes:
        """One shard's file: orjson where that is exact (a value its worker packed goes in as its bytes), json
        where a value holds NaN or ±inf or what orjson refuses."""
        if self.not_finite.isdisjoint(parts):
            entries = {k: [*self.entries[k][:2], orjson.Fragment(data) if data is not None else pack(value), *extra]
                       for k, (value, data, extra) in parts.items()}
            try:
                return orjson.dumps({**self.header, "shard": shard, "entries": entries})
            except TypeError:
                pass
        entries = {k: [*self.entries[k][:2], pack(value), *extra] for k, (value, _, extra) in parts.items()}
        return json.dumps({**self.header, "shard": shard, "entries": entries}, separators=(",", ":")).encode()

    def _save_head(self) -> None:
        """results.json: the layout, for a reader (the shards carry their own header); rewritten when it differs."""
        names = {"shard_files": self.shard_path(0).name.replace(".0.", ".<n>.")}
        if self.split is not None:
            names["heavy_files"] = self.heavy_path(0).name.replace(".0.", ".<n>.")
        head = orjson.dumps({**self.header, **names})
        try:
            same = os.path.getsize(self.path) == len(head) and self.path.read_bytes() == head
        except OSError:
            same = False
        if not same:
            atomic_write_bytes(self.path, head)
