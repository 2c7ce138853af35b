"""Hostile or careless sweep files: each is refused in one line, quickly, before anything is built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError

BASE = "study: s\nmodels: [llama_7b]\nfilesystems: {fs: {path: /tmp}}\n"


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(path: Path) -> str:
    with pytest.raises(UserError) as exc:
        expand(load_sweep(path))
    message = str(exc.value)
    assert "\n" not in message
    assert str(path) in message or message.startswith("study s:")
    return message


def test_anchor_bomb_is_refused_fast(tmp_path: Path) -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    path = write(tmp_path, BASE + "\n".join(lines) + "\n")
    assert path.stat().st_size < 1000
    assert "aliases" in refused(path)  # sized linearly from the file: the 9^9 expansion is never built


def test_recursive_alias_and_deep_nesting(tmp_path: Path) -> None:
    assert "alias refers to the node that contains it" in refused(write(tmp_path, BASE + "x: &x [*x]\n"))
    deep = BASE + "x: " + "[" * 3000 + "]" * 3000 + "\n"
    assert "nested deeper than" in refused(write(tmp_path, deep, "deep.yaml"))


def test_binary_fifo_and_missing_files(tmp_path: Path) -> None:
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    assert "not a text file" in refused(binary)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo)  # never opened: opening a FIFO would block
    assert "no such file" in refused(tmp_path / "absent.yaml")


def test_duplicate_keys_are_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "checkpoint: {writes: 2}\nrepetitions: 2\ncheckpoint: {reads: 1}\n")
    message = refused(path)
    assert f"{path}:6: checkpoint: key given twice (first on line 4)" in message
    nested = write(tmp_path, BASE + "checkpoint: {writes: 2, writes: 3}\n", "nested.yaml")
    assert "writes: key given twice" in refused(nested)


def test_matrix_over_max_points_is_refused_from_axis_sizes(tmp_path: Path) -> None:
    axes = ", ".join(f"{axis}: [{', '.join(str(v) for v in range(1, 11))}]"
                     for axis in ("nodes", "ranks_per_node", "block_mib", "rank_shift", "writes"))
    path = write(tmp_path, BASE + f"matrix: {{{axes}, reads: [{', '.join(map(str, range(11)))}]}}\n")
    assert "expands to 1,100,000 points" in refused(path) and "over max_points 1,000,000" in refused(path)
    small = write(tmp_path, BASE + "max_points: 3\nmatrix: {nodes: [1, 2]}\nrepetitions: 2\n", "small.yaml")
    assert "expands to 4 points" in refused(small) and "over max_points 3" in refused(small)


def test_unset_variable_in_a_path_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STUDYCTL_TEST_UNSET", raising=False)
    path = write(tmp_path, "study: s\nmodels: [llama_7b]\nfilesystems: {fs: {path: $STUDYCTL_TEST_UNSET/ckpt}}\n")
    assert "environment variable STUDYCTL_TEST_UNSET is not set" in refused(path)
    monkeypatch.setenv("STUDYCTL_TEST_UNSET", str(tmp_path))
    assert load_sweep(path).filesystems["fs"].path == f"{tmp_path}/ckpt"


def test_reads_without_writes_and_unsafe_names(tmp_path: Path) -> None:
    assert "reads 3 with writes 0" in refused(write(tmp_path, BASE + "checkpoint: {writes: 0, reads: 3}\n"))
    axis = write(tmp_path, BASE + "checkpoint: {reads: 2}\nmatrix: {writes: [0, 1]}\n", "axis.yaml")
    assert "reads 2 with writes 0" in refused(axis)
    for name in ("../x", "a" * 65, "has space", ".hidden"):
        bad = write(tmp_path, BASE.replace("study: s", f"study: {name!r}"), "name.yaml")
        assert "letters, digits" in refused(bad)
    model = ("study: s\nmodels: [{name: ../m, num_layers: 2, hidden_size: 64, ffn_hidden_size: 128, "
             "num_attention_heads: 2, vocab_size: 100}]\nfilesystems: {fs: {path: /tmp}}\n")
    assert "models.0.name" in refused(write(tmp_path, model, "model.yaml"))
