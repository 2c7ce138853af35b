"""Plots: every varying axis gets its own channel, facets beyond; ideal lines only where writers grow."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
from matplotlib import pyplot as plt

from studyctl.analysis.figures import make_plots
from studyctl.analysis.plots.scaling import BANDWIDTH, _panel
from studyctl.analysis.plots.style import MAX_SERIES_PER_PANEL, encode
from studyctl.analysis.tables import build_tables
from tests.resultgen import make_point, write_result


def frame(**axes: list) -> pd.DataFrame:
    """Every combination of the given axis values, one row each."""
    rows = [{}]
    for axis, values in axes.items():
        rows = [{**r, axis: v} for r in rows for v in values]
    return pd.DataFrame(rows)


def test_each_axis_its_own_channel_most_values_take_colour() -> None:
    data = frame(restore=["rank", "full"], block_mib=[1, 4, 16])
    enc = encode(data, ["restore", "block_mib"])
    channels = {axis: channel for axis, (channel, _) in enc.channels.items()}
    assert channels == {"block_mib": "color", "restore": "marker"} and not enc.facets
    styles = {str(enc.style(r)) for r in data.to_dict("records")}
    assert len(styles) == len(data)  # 6 series, 6 different looks
    three = frame(block_mib=[1, 4], restore=["rank", "full"], io_mode=["buffered", "direct"])
    enc = encode(three, ["block_mib", "restore", "io_mode"])
    assert sorted(channel for channel, _ in enc.channels.values()) == ["color", "linestyle", "marker"]
    assert len({str(enc.style(r)) for r in three.to_dict("records")}) == 8


def test_axes_beyond_the_channels_become_facets() -> None:
    data = frame(a=[1, 2], b=[1, 2], c=[1, 2], d=[1, 2])
    enc = encode(data, ["a", "b", "c", "d"])
    assert len(enc.channels) == 3 and enc.facets == ["d"]
    assert len(enc.facet_groups(data)) == 2


def test_too_many_series_per_panel_move_an_axis_to_facets() -> None:
    data = frame(a=list(range(5)), b=list(range(4)))
    enc = encode(data, ["a", "b"])
    assert enc.facets and max(len(g.drop_duplicates(enc.series_axes)) for _, g in enc.facet_groups(data)) \
        <= MAX_SERIES_PER_PANEL


def test_axis_with_more_values_than_any_channel_is_a_facet() -> None:
    data = frame(a=list(range(12)))
    enc = encode(data, ["a"])
    assert enc.facets == ["a"] and not enc.channels


def _write_zero_study(study: Path) -> None:
    for zero in (0, 1):
        for n in (1, 2):
            for rep in range(2):
                write_result(study, make_point(zero=zero, nodes=n, rep=rep), [2.0 * n], [2.0 * n],
                             writers=2 if zero == 0 else None)


def test_ideal_line_only_where_ranks_moving_bytes_grow(tmp_path: Path) -> None:
    _write_zero_study(tmp_path / "z")
    summary = build_tables(tmp_path / "z").summary
    write = summary[summary["phase"] == "write"]
    for zero, expect_ideal in ((0, False), (1, True)):
        data = write[write["zero_stage"] == zero]
        fig, ax = plt.subplots()
        ideal, fixed = _panel(ax, data, encode(data, []), BANDWIDTH, "t")
        plt.close(fig)
        assert ideal is expect_ideal and fixed is not expect_ideal


def test_make_plots_declares_every_plot_and_draws_it(tmp_path: Path) -> None:
    study = tmp_path / "s"
    for restore in ("rank", "full"):
        for block in (1, 4):
            for n in (1, 2):
                for rep in range(2):
                    p = make_point(nodes=n, rep=rep, restore=restore, block_mib=block)
                    write_result(study, p, [n * block * (2 if restore == "full" else 1.0)], [1.0])
    tables = build_tables(study)
    plots, skipped = make_plots(tables.summary, tables.ranks, tmp_path / "plots")
    kinds = {p.kind for p in plots}
    assert {"bandwidth", "duration", "efficiency", "rank_spread"} <= kinds
    assert any("one io_mode" in s for s in skipped)
    for p in plots:
        img = mpimg.imread(p.path)[..., :3]
        assert (img < 0.95).any(axis=-1).mean() > 0.02, p.path
        assert p.title


def _sync_points(study: Path, **vary: tuple) -> None:
    """Sync points over every combination of `vary` (Point fields or checkpoint options), 2 repetitions."""
    combos = [{}]
    for axis, values in vary.items():
        combos = [{**c, axis: v} for c in combos for v in values]
    for combo in combos:
        for rep in range(2):
            p = make_point(rep=rep, **combo)
            f = (1.3 if combo.get("io_mode") == "direct" else 1.0) * (1.1 if combo.get("zero") == 3 else 1.0)
            write_result(study, p, [f, f], [2 * f, 2 * f])


def test_restore_time_keeps_every_varying_setting_apart(tmp_path: Path) -> None:
    from studyctl.analysis.training.cells import display_axes
    from studyctl.analysis.training.plots import restore_time

    _sync_points(tmp_path / "s", zero=(1, 3), io_mode=("buffered", "direct"), restore=("rank", "full"))
    cells = build_tables(tmp_path / "s").training_cells
    axes = display_axes(cells)
    assert {"zero_stage", "io_mode", "restore"} <= set(axes)  # nothing pooled
    assert len(cells.drop_duplicates(["zero_stage", "io_mode", "restore"])) == len(cells) == 8
    zero1 = cells[cells["zero_stage"] == 1]
    direct = zero1[zero1["io_mode"] == "direct"]["failure_restore_s"]
    buffered = zero1[zero1["io_mode"] == "buffered"]["failure_restore_s"]
    assert direct.max() < buffered.min()  # 1.3× faster reads: a pooled bar would hide it
    assert restore_time(cells, tmp_path / "r.png", [a for a in axes if a != "model"]).stat().st_size > 10_000


def test_rank_spread_labels_name_every_setting_that_varies(tmp_path: Path) -> None:
    from studyctl.analysis.plots.ranks import point_labels

    _sync_points(tmp_path / "s", restore=("rank", "full"), rank_shift=(0, 2), nodes=(1, 2))
    tables = build_tables(tmp_path / "s")
    points, axes = point_labels(tables.ranks[tables.ranks["phase"] == "write"], tables.summary)
    assert {"restore", "rank_shift", "nodes"} <= set(axes)
    assert len(set(points["label"])) == len(points) == 2 * 2 * 2 * 2
    assert all("restore " in t and "rank_shift " in t and ", rep " in t for t in points["label"])


def test_scaling_plots_on_simulated_nodes_say_so(tmp_path: Path) -> None:
    from studyctl.analysis.tables import SIMULATED_EFFICIENCY

    for simulated in (True, False):
        study = tmp_path / f"real{simulated}"
        for n in (1, 2):
            for rep in range(2):
                write_result(study, make_point(nodes=n, rep=rep), [n, n], [n, n], simulated=simulated)
        summary = build_tables(study).summary
        plots, _ = make_plots(summary, build_tables(study).ranks, tmp_path / f"plots{simulated}")
        titles = {p.kind: p.title for p in plots}
        caveat = "simulated nodes (one machine, one disk)"
        assert (caveat in titles["bandwidth"] and caveat in titles["efficiency"]) is simulated
        two = summary[summary["nodes"] == 2]
        assert bool((two["scaling_efficiency_caveat"] == SIMULATED_EFFICIENCY).all()) is simulated
        assert bool(summary["scaling_efficiency_caveat"].isna().all()) is not simulated
