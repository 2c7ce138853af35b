"""Collect's tables and plots are declared by their topics (`analysis.outputs`): a topic that declares a new table
and a new set of plots gets them written, listed in the report and in the manifest (which derives from
`CollectResult`), and kept by a collect with nothing new, with no edit to collect's own modules."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import studyctl.analysis
from studyctl.analysis.collect import collect
from studyctl.analysis.collect_result import CollectResult, from_manifest, to_manifest
from studyctl.analysis.outputs import declared
from studyctl.attempt.paths import StudyPaths
from tests.unit.test_collect_unchanged import _study  # four points, two node counts

# A topic package as a topic writes one: its own folder, an `outputs` module, nothing imported from collect.
PROBE = '''
from studyctl.analysis.outputs import PlotOutput, TableOutput
from studyctl.analysis.plots.plot import Plot
from studyctl.analysis.plots.style import plt, save


def _per_node(t):
    return t.points.groupby("nodes", as_index=False)["bytes_over_time_GiBps"].mean()


def _draw(t, out_dir):
    fig, ax = plt.subplots()
    ax.plot(t.points["nodes"], t.points["bytes_over_time_GiBps"], "o")
    return [Plot("probe", "bandwidth per point", save(fig, out_dir / "probe.png"))], ["probe_extra: not drawn"]


TABLES = (TableOutput("probe_per_node", _per_node),)
PLOTS = (PlotOutput("probe", _draw),)
'''


@pytest.fixture
def probe_topic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A topic `probe` beside the real ones (a folder added to the package's search path, not a stand-in)."""
    extra = tmp_path / "topics"
    (extra / "probe").mkdir(parents=True)
    (extra / "probe" / "__init__.py").write_text("")
    (extra / "probe" / "outputs.py").write_text(PROBE)
    monkeypatch.setattr(studyctl.analysis, "__path__", [*studyctl.analysis.__path__, str(extra)])
    yield
    for name in [m for m in sys.modules if m.startswith("studyctl.analysis.probe")]:
        del sys.modules[name]


def test_a_topics_declared_table_and_plots_are_written_listed_and_kept(tmp_path: Path, probe_topic: None) -> None:
    study = _study(tmp_path)
    paths = StudyPaths(study)
    made = collect(study)
    files = [paths.tables / "probe_per_node.csv", paths.tables / "probe_per_node.parquet"]
    assert made.tables["probe_per_node"] == files
    points = pd.read_parquet(paths.tables / "points.parquet")
    want = points.groupby("nodes", as_index=False)["bytes_over_time_GiBps"].mean()
    pd.testing.assert_frame_equal(pd.read_parquet(files[1]), want)
    assert pd.read_csv(files[0])["nodes"].tolist() == [1, 2]
    assert [p.path for p in made.plot_sets["probe"]] == [paths.plots / "probe.png"]
    assert (paths.plots / "probe.png").stat().st_size > 0 and "probe_extra: not drawn" in made.skipped_plots
    # the base's and the real topics' outputs are still there, in declared order
    assert list(made.tables)[:4] == ["checkpoints", "points", "summary", "ranks"]
    assert {"training", "ceilings", "recovery"} <= set(made.tables)
    assert "probe_per_node" in paths.report_md.read_text()
    manifest = json.loads(paths.outputs_manifest.read_text())
    # listed relative to the study folder (a moved study names its own files)
    assert dict(manifest["tables"])["probe_per_node"] == [str(f.relative_to(study)) for f in files]
    assert dict(manifest["plot_sets"])["probe"][0]["path"] == "plots/probe.png"
    again = collect(study)
    assert again.unchanged and again.tables == made.tables and again.plot_sets == made.plot_sets
    assert list(again.tables) == list(made.tables) and again.plots == made.plots  # in declared order
    files[1].unlink()  # a declared output gone: made again
    redone = collect(study)
    assert not redone.unchanged and files[1].exists()


def test_the_manifest_reads_back_every_field_of_the_result(tmp_path: Path) -> None:
    study = _study(tmp_path)
    made = collect(study)
    back = from_manifest(StudyPaths(study), json.loads(json.dumps(to_manifest(made))))
    assert back.problems == made.problems and back.failures == made.failures
    keep = {"unchanged": True, "files_read": 0, "files_cached": made.files_read + made.files_cached}
    assert back == CollectResult(**{**made.__dict__, **keep})


def test_a_name_declared_twice_is_refused(probe_topic: None) -> None:
    from studyctl.analysis.outputs import TableOutput

    assert "probe_per_node" in [t.name for t in declared("TABLES")]
    with pytest.raises(ValueError, match="declared twice"):
        declared("TABLES", (TableOutput("probe_per_node", lambda t: t.points),))
