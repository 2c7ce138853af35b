"""Per-point frames (checkpoints, ranks) kept between collects and patched by point, never rebuilt from every row.

A collect after one result changed rebuilt the checkpoints frame from 60,000 row dicts and the ranks frame from
450,000 rank tuples (10,000 points): two fifths of its table work. Each frame is kept as an Arrow IPC file under
tables/.cache with a header in its schema metadata: format, version, the study directory's identity (device and
inode), a digest of the code (studyctl's sources and the libraries' versions), and per point (in row order) the
stamp of the result file its rows came from (relative path, mtime, size: the parse cache's key) and its row count.

The next collect reuses the rows of every point whose stamp is unchanged, builds only the new or changed points'
rows (with the same builder a rebuild uses) and splices them in at their place. The patch must equal a rebuild,
so it is taken only where that is certain: the new rows' frame has the stored frame's columns in the same order
and every column the same dtype (pandas infers a column's dtype from its values; a column whose values infer one
dtype in each of two parts infers it in their union). Otherwise, where points were only removed (what is left
might infer narrower dtypes), or where most points changed, the frame is rebuilt. A frame is kept only if it reads
back from Arrow exactly (same dtypes, and in object columns the same values of the same types); a damaged,
foreign, older or unreadable file is rebuilt. Nothing read here runs code: Arrow IPC holds data only.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from studyctl.analysis.output_memo import code_digest
from studyctl.analysis.result_cache import _identity  # a study directory's identity: the parse cache's, one rule
from studyctl.fsutil import atomic_open

FRAME_FORMAT = "studyctl-point-frame"
FRAME_VERSION = 1
HEADER_KEY = b"studyctl"
MAX_FRAME_BYTES = 1 << 30  # far above 10,000 points' frames (compressed); a larger file is not one of ours
REBUILD_SHARE = 0.25  # more new rows than this share of the frame: building them all is as quick as patching

Stamp = tuple[str, int, int]  # a result file's path relative to the study, mtime_ns, size
Complete = Callable[[Sequence[int]], None]  # the rows at these indices given every field a builder reads


def _whole(indices: Sequence[int]) -> None:
    """Rows that come whole."""


@dataclass(frozen=True)
class FrameSpec:
    """One per-point frame: its cache file's name, the builder a rebuild uses (rows → frame) and how many of the
    frame's rows one point's parsed rows give (the builder makes them in point order)."""

    name: str
    build: Callable[[Sequence[dict[str, Any]]], pd.DataFrame]
    count: Callable[[dict[str, Any]], int]
    # the column names each of a point's frame rows comes with, in order (frames built from row dicts, whose column
    # order is the order names first appear); None where the builder fixes the columns
    keys: Callable[[dict[str, Any]], list[list[str]]] | None = None


def _header(study_dir: Path) -> dict[str, Any] | None:
    identity = _identity(study_dir)
    if identity is None:
        return None
    import pyarrow as pa

    return {"format": FRAME_FORMAT, "version": FRAME_VERSION, "study_dir": identity,
            "code": f"{code_digest()}/{pa.__version__}"}


def same_frame(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Equal as a rebuild must be: columns in order, dtypes, index, values; in object columns also each value's
    type (None is not NaN, 1 is not 1.0 nor True)."""
    if list(a.columns) != list(b.columns) or not a.dtypes.equals(b.dtypes) or not a.index.equals(b.index):
        return False
    if not a.equals(b):
        return False
    return all(list(map(type, a[c].tolist())) == list(map(type, b[c].tolist()))
               for c in a.columns if a[c].dtype == object)


def _read(path: Path, header: dict[str, Any]) -> tuple[pd.DataFrame, list[tuple[Stamp, int]]] | None:
    """The stored frame and its points' (stamp, row count), if the file is ours, for this directory and code."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO never blocks
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FRAME_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
        table = ipc.open_file(pa.py_buffer(data)).read_all()
        meta = json.loads((table.schema.metadata or {}).get(HEADER_KEY, b"null"))
        if not isinstance(meta, dict) or any(meta.get(k) != v for k, v in header.items()):
            return None
        points = [((str(p), int(m), int(s)), int(n)) for p, m, s, n in meta["points"]]
        if sum(n for _, n in points) != table.num_rows or any(n < 0 for _, n in points):
            return None
        frame = table.replace_schema_metadata(None).to_pandas()
        if list(frame.columns) != meta["columns"] or [str(t) for t in frame.dtypes] != meta["dtypes"]:
            return None
        return frame, points
    except (OSError, ValueError, TypeError, KeyError, pa.ArrowException):
        return None  # damaged, truncated or not ours: rebuilt
    finally:
        os.close(fd)


def _write(path: Path, frame: pd.DataFrame, header: dict[str, Any], points: list[tuple[Stamp, int]]) -> None:
    """Kept only if Arrow gives this very frame back (checked where it might not: object columns, whose values may
    be of any type); otherwise the stale file goes (the next collect rebuilds)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    objects = [c for c in frame.columns if frame[c].dtype == object]  # numbers, booleans and strings come back
    try:  # as they were (NaN is null and null NaN again); read, the dtypes are checked against the header's
        table = pa.Table.from_pandas(frame, preserve_index=False)
        exact = frame.index.equals(pd.RangeIndex(len(frame))) and (
            not objects or same_frame(table.select(objects).to_pandas(), frame[objects]))
    except (pa.ArrowException, ValueError, TypeError):
        exact = False
    if not exact:
        path.unlink(missing_ok=True)
        return
    meta = {**header, "columns": list(frame.columns), "dtypes": [str(t) for t in frame.dtypes],
            "points": [[*s, n] for s, n in points]}
    table = table.replace_schema_metadata({HEADER_KEY: json.dumps(meta).encode()})
    with atomic_open(path) as fh, ipc.new_file(fh, table.schema,
                                               options=ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)


def _patched(stored: pd.DataFrame, old: list[tuple[Stamp, int]], rows: Sequence[dict[str, Any]],
             stamps: Sequence[Stamp], spec: FrameSpec, complete: Complete) -> pd.DataFrame | None:
    """The stored frame with new and changed points' rows built and spliced in at their places; None where that
    would not be exactly a rebuild (or not be quicker)."""
    starts: dict[Stamp, tuple[int, int]] = {}
    at = 0
    for s, n in old:
        starts[s] = (at, n)
        at += n
    now = set(stamps)
    dropped = sum(n for s, n in old if s not in now)
    fresh = [i for i, s in enumerate(stamps) if s not in starts]
    complete(fresh)
    built = spec.build([rows[i] for i in fresh]) if fresh else stored.iloc[0:0]
    if len(built) > REBUILD_SHARE * max(len(stored), 1):
        return None
    built = _missing_as(built, stored)
    if len(built) == 0:
        if dropped:
            return None  # rows only removed: what is left may infer narrower dtypes
        if len(old) == len(stamps):
            return stored
    elif list(built.columns) != list(stored.columns) or not built.dtypes.equals(stored.dtypes):
        return None
    elif spec.keys is not None and any(k != list(stored.columns) for i in fresh for k in spec.keys(rows[i])):
        return None  # a new row without every column, or in another order, could move a column
    return _spliced(stored, starts, built, rows, stamps, spec)


def _missing_as(built: pd.DataFrame, stored: pd.DataFrame) -> pd.DataFrame:
    """A column of the new rows with nothing recorded (None only: pandas leaves it object), where the kept frame's
    column is a float or a string column, as that column: beside floats or strings pandas infers None as their NA
    (NaN), so the union would infer the kept column's dtype (a point with no heavy rank among those with one)."""
    cast = {c: stored[c].dtype for c in built.columns
            if c in stored and built[c].dtype == object and stored[c].dtype != object and len(built)
            and (stored[c].dtype == "float64" or pd.api.types.is_string_dtype(stored[c].dtype))
            and built[c].isna().all()}
    return built.astype(cast) if cast else built


def _spliced(stored: pd.DataFrame, starts: dict[Stamp, tuple[int, int]], built: pd.DataFrame,
             rows: Sequence[dict[str, Any]], stamps: Sequence[Stamp], spec: FrameSpec) -> pd.DataFrame | None:
    """Rows in point order: stored slices (contiguous points joined into one) and the built points' rows."""
    pieces: list[pd.DataFrame] = []
    run: tuple[int, int] | None = None
    fresh_at = 0
    for s, row in zip(stamps, rows, strict=True):
        hit = starts.get(s)
        if hit is not None and run is not None and run[1] == hit[0]:
            run = (run[0], hit[0] + hit[1])
            continue
        if run is not None:
            pieces.append(stored.iloc[run[0]:run[1]])
            run = None
        if hit is not None:
            run = (hit[0], hit[0] + hit[1])
            continue
        n = spec.count(row)
        pieces.append(built.iloc[fresh_at:fresh_at + n])
        fresh_at += n
    if run is not None:
        pieces.append(stored.iloc[run[0]:run[1]])
    if fresh_at != len(built):
        return None  # the builder made other rows than `count` says: never guess
    pieces = [p for p in pieces if len(p)] or [stored.iloc[0:0]]
    return pd.concat(pieces, ignore_index=True) if len(pieces) > 1 else pieces[0].reset_index(drop=True)


def point_frame(spec: FrameSpec, rows: Sequence[dict[str, Any]], stamps: Sequence[Stamp], cache_dir: Path,
                study_dir: Path, later: list[Callable[[], None]] | None = None,
                complete: Complete = _whole) -> pd.DataFrame:
    """`spec.build(rows)`, from the frame kept under `cache_dir` where only some points changed (`stamps`: each
    row's result file, in row order); the frame kept is brought up to date, now or, with `later`, by the work it
    is handed (a copy of the frame: the caller may change its own): a collect writes it in the child that writes
    the tables, while it builds the rest. `complete`: rows may come without what only the builder reads (the
    parse cache's bulky rows); it is called with the indices of the rows about to be built, before."""
    if len(stamps) != len(rows):
        raise ValueError("one stamp per row")
    header = _header(study_dir)
    path = cache_dir / f"frames.{spec.name}.arrow"
    stored = _read(path, header) if header is not None else None
    frame = None
    if stored is not None:
        frame = _patched(stored[0], stored[1], rows, stamps, spec, complete)
        if frame is stored[0]:
            return frame  # nothing changed: the file holds it already
    if frame is None:
        complete(range(len(rows)))
        frame = spec.build(rows)
    if header is not None:
        points = [(s, spec.count(r)) for s, r in zip(stamps, rows, strict=True)]
        if later is None:
            _write(path, frame, header, points)
        else:
            kept = frame.copy()
            later.append(lambda: _write(path, kept, header, points))
    return frame
