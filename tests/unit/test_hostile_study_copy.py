"""A results directory's own YAML (the sweep copy) is read within the sweep file's bounds: never a hang, never a
traceback, whatever a received directory holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.analysis.collect import collect
from tests.resultgen import make_point, write_result

BOMB = "\n".join(['a: &a ["x","x","x","x","x","x","x","x","x"]'] + [
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)])


@pytest.mark.parametrize("copy", [BOMB, "study: [unfinished\n", "description: x\ndescription: y\n", "\0\1\2"])
def test_collect_reads_a_hostile_sweep_copy_within_bounds(tmp_path: Path, copy: str) -> None:
    study = tmp_path / "s"
    for rep in range(2):
        write_result(study, make_point(rep=rep), [2.0], [3.0])
    (study / "sweep.yaml").write_text(copy)
    result = collect(study)
    assert result.points == 2 and result.report_html.is_file()


def test_collect_shows_a_sound_copy_s_description(tmp_path: Path) -> None:
    study = tmp_path / "s"
    write_result(study, make_point(), [2.0], [3.0])
    (study / "sweep.yaml").write_text("study: s\ndescription: the one we meant\n")
    assert "the one we meant" in collect(study).report_html.read_text()
