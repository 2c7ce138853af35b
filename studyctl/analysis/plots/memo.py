"""A plot is drawn again only when what it shows changed: a digest of its inputs beside its file's stat.

A collect after one result changed rebuilds the tables, but most figures show the same numbers as before, and
drawing them (text layout and PNG encoding inside matplotlib) was most of such a collect. Each PNG is recorded
with a digest of the data it was drawn from and of the code that drew it (every source file of studyctl, the
versions of matplotlib, pandas and numpy), and with the stat of the file written (device, inode, size, mtime:
every write is an atomic rename, so a new inode). A plot whose inputs and file are both unchanged is kept.

The record (`plots.json` under tables/.cache) is plain JSON and advisory: missing, damaged or written for other
files (a copied or received study: other inodes) only means every plot is drawn again. Plot functions ask
`kept(path, *inputs)` before drawing; `style.save` records what it wrote. Outside `recording` (tests, compare)
nothing is kept and nothing recorded.
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

MEMO_FORMAT = "studyctl-plot-memo"
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


class PlotMemo:
    """PNG name → [digest of its inputs, stamp of the file]; the names kept or drawn this time are saved.
    `forget`: keep nothing (a forced collect draws every plot)."""

    def __init__(self, path: Path, plots_dir: Path, forget: bool = False) -> None:
        self.path = path
        self.plots_dir = plots_dir
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

    def kept(self, png: Path, key: str) -> bool:
        name = self._name(png)
        if name is None:
            return False
        entry = self.old.get(name)
        stamp = _stamp(png)
        if entry is not None and stamp is not None and entry == [key, stamp]:
            self.new[name] = entry
            return True
        self.pending[name] = key
        return False

    def drawn(self, png: Path) -> None:
        name = self._name(png)
        key = self.pending.pop(name, None) if name is not None else None
        stamp = _stamp(png)
        if name is not None and key is not None and stamp is not None:
            self.new[name] = [key, stamp]

    def _name(self, png: Path) -> str | None:
        """Only PNGs directly in this study's plot folder are recorded (by name)."""
        return png.name if Path(png).parent == self.plots_dir else None

    def save(self) -> None:
        if self.new != self.old:
            atomic_write_json(self.path, {"format": MEMO_FORMAT, "version": MEMO_VERSION, "plots": self.new})


_ACTIVE: ContextVar[PlotMemo | None] = ContextVar("plot_memo", default=None)


@contextmanager
def recording(memo: PlotMemo) -> Iterator[PlotMemo]:
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
        memo.drawn(Path(png))
