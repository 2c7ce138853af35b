"""An output is made again only when what it shows changed: a digest of its inputs beside its file's stat.

A collect after one result changed rebuilds the tables, but most figures show the same numbers as before and
most tables hold the same rows; drawing the figures (text layout and PNG encoding inside matplotlib) and writing
the tables (110 MB of CSV and Parquet at 10,000 results) was most of such a collect. Each output file is
recorded with a digest of what it was made from and of the code that made it (every source file of studyctl, the
versions of matplotlib, pandas and numpy), and with the stat of the file written (device, inode, size, mtime:
every write is an atomic rename, so a new inode). An output whose inputs and file are both unchanged is kept.

A record (`plots.json`, `tables.json` under tables/.cache) is plain JSON and advisory: missing, damaged or
written for other files (a copied or received study: other inodes) only means every output is made again. Plot
functions ask `kept(path, *inputs)` before drawing and `style.save` records what it wrote (`drawn`); outside
`recording` (tests, compare) nothing is kept and nothing recorded. The tables' writer holds its own memo.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

import studyctl
from studyctl.attempt.tree import read_regular
from studyctl.fsutil import atomic_write_json

MEMO_FORMAT = "studyctl-output-memo"
MEMO_VERSION = 1


@cache
def code_digest() -> str:
    """Every source file of studyctl and the plotting libraries' versions: a code change draws every plot again."""
    h = hashlib.sha256(f"{MEMO_VERSION}/{matplotlib.__version__}/{pd.__version__}/{np.__version__}\n".encode())
    root = Path(studyctl.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(f"{path.relative_to(root).as_posix()}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _update(h: Any, value: Any) -> None:
    """Exact: numbers by their bytes, anything else by repr (a float's repr round-trips), column names and types,
    the index."""
    if isinstance(value, pd.Series):
        value = value.to_frame()
    if not isinstance(value, pd.DataFrame):
        h.update(f"{type(value).__name__}:{value!r}\n".encode())
        return
    h.update(repr((list(value.columns), [str(t) for t in value.dtypes], value.index.tolist())).encode())
    for _, column in value.items():
        if isinstance(column.dtype, np.dtype) and column.dtype.kind in "biufc":
            h.update(np.ascontiguousarray(column.to_numpy()).tobytes())
        else:
            h.update(repr([(type(v).__name__, v) for v in column.tolist()]).encode())


def digest(*inputs: Any) -> str:
    h = hashlib.sha256(code_digest().encode())
    for value in inputs:
        _update(h, value)
    return h.hexdigest()


def _stamp(path: Path) -> list[int] | None:
    try:
        st = os.lstat(path)  # a symlink put in its place is never a plot of ours
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns] if os.path.isfile(path) and \
        not os.path.islink(path) else None


class OutputMemo:
    """File name in `folder` → [digest of its inputs, stamp of the file]; the names kept or made this time are
    saved. `forget`: keep nothing (a forced collect makes every output again)."""

    def __init__(self, path: Path, folder: Path, forget: bool = False) -> None:
        self.path = path
        self.folder = folder
        self.old: dict[str, list[Any]] = {}
        self.new: dict[str, list[Any]] = {}
        self.pending: dict[str, str] = {}
        try:
            raw = json.loads(read_regular(path)) if not forget else None  # a FIFO never blocks
        except (OSError, ValueError, RecursionError):
            raw = None
        if isinstance(raw, dict) and raw.get("format") == MEMO_FORMAT and raw.get("version") == MEMO_VERSION \
                and isinstance(raw.get("plots"), dict):
            self.old = {k: v for k, v in raw["plots"].items() if isinstance(v, list) and len(v) == 2}

    def kept(self, out: Path, key: str) -> bool:
        """Whether `out` was made from `key` and is untouched; if not, `key` waits for `made(out)`."""
        name = self._name(out)
        if name is None:
            return False
        entry = self.old.get(name)
        stamp = _stamp(out)
        if entry is not None and stamp is not None and entry == [key, stamp]:
            self.new[name] = entry
            return True
        self.pending[name] = key
        return False

    def made(self, out: Path) -> None:
        """`out` was just written: recorded with the key `kept` was asked about."""
        name = self._name(out)
        key = self.pending.pop(name, None) if name is not None else None
        stamp = _stamp(out)
        if name is not None and key is not None and stamp is not None:
            self.new[name] = [key, stamp]

    def _name(self, out: Path) -> str | None:
        """Only files directly in this memo's folder are recorded (by name)."""
        return out.name if Path(out).parent == self.folder else None

    def save(self) -> None:
        if self.new != self.old:
            atomic_write_json(self.path, {"format": MEMO_FORMAT, "version": MEMO_VERSION, "plots": self.new})


_ACTIVE: ContextVar[OutputMemo | None] = ContextVar("plot_memo", default=None)


@contextmanager
def recording(memo: OutputMemo) -> Iterator[OutputMemo]:
    """Plots drawn inside the block consult and update `memo`; it is saved when the block ends without error."""
    token = _ACTIVE.set(memo)
    try:
        yield memo
        memo.save()
    finally:
        _ACTIVE.reset(token)


def kept(png: Path, *inputs: Any) -> bool:
    """True when `png` was drawn by this code from these same inputs and is untouched since: skip drawing it.
    Otherwise the inputs' digest waits for `style.save` to record it beside the new file."""
    memo = _ACTIVE.get()
    return memo is not None and memo.kept(Path(png), digest(Path(png).name, *inputs))


def drawn(png: Path) -> None:
    """`png` was just written (by `style.save`): record it with the digest `kept` computed."""
    memo = _ACTIVE.get()
    if memo is not None:
        memo.made(Path(png))


def table_digest(name: str, table: Any) -> str:
    """A pyarrow table by its schema (with pandas' metadata) and every column's buffers, and the code. A flat
    column's values are fixed by its type, length, offset, validity (none where nothing is null, however Arrow
    holds that) and data buffers, so equal digests mean equal tables; the buffers are hashed where they lie (an IPC
    stream of the table was a copy of 200 MB and most of a table's writing time). A column of another kind (nested,
    dictionary: values outside its buffers) has the table hashed by its IPC stream."""
    import pyarrow as pa

    h = hashlib.sha256(f"{code_digest()}/{name}\n".encode())
    h.update(memoryview(table.schema.serialize()))
    if any(pa.types.is_nested(f.type) or pa.types.is_dictionary(f.type) or isinstance(f.type, pa.ExtensionType)
           for f in table.schema):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        h.update(memoryview(sink.getvalue()))
        return h.hexdigest()
    for column in table.columns:
        h.update(f"column {column.num_chunks}\n".encode())
        for chunk in column.chunks:
            h.update(f"{len(chunk)} {chunk.offset} {chunk.null_count}\n".encode())
            validity, *data = chunk.buffers()
            for buf in [validity if chunk.null_count else None, *data]:
                if buf is None:
                    h.update(b"none\n")
                else:
                    h.update(f"{buf.size}\n".encode())
                    h.update(memoryview(buf))
    return h.hexdigest()
