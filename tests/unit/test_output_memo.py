"""Plots drawn and tables written again only when what they hold changed: a touched result keeps every PNG and
table file, a result that moves a cell redraws the plots and rewrites the tables that show it, and a file deleted,
replaced or copied is made again. What is kept is byte for byte what making it again gives."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studyctl.analysis.collect import collect
from studyctl.analysis.output_memo import digest
from tests.resultgen import make_point, write_result

MODELS = ("gpt2-125m", "gpt2-1.5b")


def _study(root: Path) -> Path:
    study = root / "memo-study"
    for model in MODELS:
        for nodes in (1, 2):
            for rep in range(2):
                bw = 2.0 * nodes + rep * 0.1
                write_result(study, make_point(model=model, nodes=nodes, rep=rep), [bw, bw], [bw * 1.2, bw * 1.2])
    return study


def _inodes(study: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in (study / "plots").glob("*.png")}


def _bytes(study: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((study / "plots").glob("*.png"))}


def _result_of(study: Path, model: str, nodes: int, rep: int) -> Path:
    point = make_point(model=model, nodes=nodes, rep=rep)
    return study / "points" / point.point_id / "attempt-1" / "result.json"


def test_a_touched_result_keeps_every_plot(tmp_path: Path) -> None:
    study = _study(tmp_path)
    first = collect(study)
    drawn = _inodes(study)
    assert {f"bandwidth_{m}.png" for m in MODELS} <= set(drawn) and "rank_spread.png" in drawn
    victim = _result_of(study, MODELS[0], 1, 0)
    victim.write_bytes(victim.read_bytes())  # same bytes, a new mtime: read again, same figures
    again = collect(study)
    assert not again.unchanged and again.files_read == 1
    assert _inodes(study) == drawn
    assert [p.path for p in again.plots] == [p.path for p in first.plots]
    kept = _bytes(study)
    collect(study, force=True)  # forced: every plot drawn again, to the same bytes
    assert all(_inodes(study)[name] != ino for name, ino in drawn.items())
    assert _bytes(study) == kept


def test_a_result_that_moves_a_cell_redraws_its_plots(tmp_path: Path) -> None:
    """Here the projections' fit spans both models, so every figure moves; what is drawn again is what a full
    redraw gives."""
    study = _study(tmp_path)
    collect(study)
    drawn = _inodes(study)
    write_result(study, make_point(model=MODELS[1], nodes=2, rep=1), [9.0, 9.0], [9.5, 9.5])
    collect(study)
    now = _inodes(study)
    assert now[f"bandwidth_{MODELS[1]}.png"] != drawn[f"bandwidth_{MODELS[1]}.png"]
    assert now["rank_spread.png"] != drawn["rank_spread.png"]
    kept = _bytes(study)
    collect(study, force=True)
    assert _bytes(study) == kept


def test_a_deleted_or_replaced_plot_is_drawn_again(tmp_path: Path) -> None:
    study = _study(tmp_path)
    collect(study)
    drawn = _bytes(study)
    gone, replaced = study / "plots" / f"bandwidth_{MODELS[0]}.png", study / "plots" / "rank_spread.png"
    gone.unlink()
    replaced.write_bytes(b"not a plot")
    victim = _result_of(study, MODELS[0], 2, 0)
    victim.write_bytes(victim.read_bytes())
    collect(study)
    assert _bytes(study) == drawn


def test_a_memo_of_another_copy_is_never_trusted(tmp_path: Path) -> None:
    """A copied study (its PNGs and memo with it) has other inodes: every plot is drawn again there."""
    study = _study(tmp_path)
    collect(study)
    copy = tmp_path / "copy" / study.name
    shutil.copytree(study, copy)  # mtimes kept, as `cp -a` keeps them; inodes are new
    (copy / "plots" / f"bandwidth_{MODELS[0]}.png").write_bytes(b"tampered")
    victim = _result_of(copy, MODELS[0], 1, 0)
    victim.write_bytes(victim.read_bytes())
    collect(copy)
    assert _bytes(copy) == _bytes(study)


def test_the_digest_tells_apart_what_a_table_would_write_differently() -> None:
    base = pd.DataFrame({"a": [0.0, 1.0], "b": ["x", "y"]})
    assert digest(base) == digest(base.copy())
    assert digest(base) != digest(base.assign(a=[-0.0, 1.0]))  # "-0.0" is not "0.0"
    assert digest(base) != digest(base.assign(a=np.array([0, 1])))  # 1 is not 1.0
    assert digest(base) != digest(base.assign(b=["x", None]))
    assert digest(base) != digest(base.rename(columns={"b": "c"}))
    assert digest(base) != digest(base.set_axis([1, 0]))
    assert digest(pd.DataFrame({"o": [1, "1"]})) != digest(pd.DataFrame({"o": ["1", "1"]}))


def _tables(study: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_ino, p.read_bytes()) for p in sorted((study / "tables").glob("*.*"))
            if p.suffix in (".csv", ".parquet")}


def test_tables_holding_the_same_rows_are_kept_and_the_rest_rewritten(tmp_path: Path) -> None:
    study = _study(tmp_path)
    collect(study)
    first = _tables(study)
    victim = _result_of(study, MODELS[0], 1, 0)
    victim.write_bytes(victim.read_bytes())
    collect(study)
    assert _tables(study) == first  # same inodes, same bytes
    write_result(study, make_point(model=MODELS[1], nodes=2, rep=1), [9.0, 9.0], [9.5, 9.5])
    collect(study)
    moved = _tables(study)
    assert moved["summary.csv"][0] != first["summary.csv"][0]
    assert moved["recovery.csv"] == first["recovery.csv"]  # no restarts: the same empty table, kept
    (study / "tables" / "points.csv").write_text("tampered")
    victim.write_bytes(victim.read_bytes())
    collect(study)
    assert _tables(study)["points.csv"][1] == moved["points.csv"][1]  # a file changed since is written again
    collect(study, force=True)
    forced = _tables(study)
    assert {n: b for n, (_, b) in forced.items()} == {n: b for n, (_, b) in moved.items()}
    assert all(forced[n][0] != ino for n, (ino, _) in moved.items())  # forced: every file written again


def test_a_table_digest_is_the_tables_values_not_how_arrow_holds_them() -> None:
    """Equal tables (a validity bitmap of no nulls or none, a slice or a copy) give one digest; a value changed,
    a null moved, a dictionary's values or a nested child's values changed give another."""
    import pyarrow as pa

    from studyctl.analysis.output_memo import table_digest

    def of(**columns: Any) -> str:
        return table_digest("t", pa.table(columns))

    strings = pa.array(["a", "bb", None, "c"])
    assert of(s=pa.array(["x", "y"])) == of(s=pa.array(["w", "x", "y"]).slice(1).filter(pa.array([True, True])))
    floats = [1.0, None, 2.0, 3.0]
    assert of(s=strings, f=pa.array(floats)) == of(s=strings.slice(0), f=pa.array(floats))
    base = of(s=strings, f=pa.array([1.0, None, 2.0, 3.0]))
    assert base != of(s=strings, f=pa.array([1.0, 2.0, None, 3.0]))  # a null moved
    assert base != of(s=strings, f=pa.array([1.0, None, 2.0, 3.5]))
    assert base != of(s=pa.array(["a", "bb", None, "d"]), f=pa.array([1.0, None, 2.0, 3.0]))
    assert of(d=pa.array(["a", "b"]).dictionary_encode()) != of(d=pa.array(["b", "a"]).dictionary_encode())
    assert of(n=pa.array([[1], [2, 3]])) != of(n=pa.array([[1], [2, 4]]))
    assert table_digest("t", pa.table({"f": [1.0]})) != table_digest("u", pa.table({"f": [1.0]}))
