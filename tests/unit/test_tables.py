"""Tables from generated result files: headline figures, ideal scaling by ranks moving bytes, adequacy flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.analysis.tables import HEADLINE, build_tables
from tests.resultgen import make_point, write_result

POINT = make_point()
NBYTES, NOMINAL = POINT.layout().total_bytes, POINT.nominal_layout().total_bytes  # resultgen: the layout's


def test_zero0_fixed_writers_have_a_flat_ideal(tmp_path: Path) -> None:
    """ZeRO-0 writes from the first replica only: 2 writers at 1 and at 2 nodes, so the ideal stays flat."""
    study = tmp_path / "ddp"
    for n, bw in ((1, 2.0), (2, 2.0)):
        for rep in range(3):
            write_result(study, make_point(zero=0, nodes=n, rep=rep), [bw], [bw], writers=2)
            write_result(study, make_point(zero=1, nodes=n, rep=rep), [bw * n], [bw * n])
    summary = build_tables(study).summary
    w = summary[summary["phase"] == "write"].set_index(["zero_stage", "nodes"])
    assert w.loc[(0, 2), "active_ranks"] == 2 and w.loc[(1, 2), "active_ranks"] == 4
    assert w.loc[(0, 2), "ideal_GiBps"] == pytest.approx(2.0)  # flat: no more writers
    assert w.loc[(0, 2), "scaling_efficiency"] == pytest.approx(1.0)
    assert w.loc[(1, 2), "ideal_GiBps"] == pytest.approx(4.0)  # doubles with writers
    assert w.loc[(1, 2), "scaling_efficiency"] == pytest.approx(1.0)


def test_projection_and_sizes(tmp_path: Path) -> None:
    study = tmp_path / "proj"
    for rep in range(3):
        write_result(study, make_point(rep=rep), [2.0, 2.0], [4.0])
    row = build_tables(study).summary.set_index("phase").loc["write"]
    assert row["bytes"] == NBYTES and row["nominal_checkpoint_bytes"] == NOMINAL  # resultgen: 1/100 scale
    assert row["projected_full_size_s"] == pytest.approx(NOMINAL / (1 << 30) / 2.0)
    assert row["scale"] == 0.01 and row[HEADLINE] == pytest.approx(2.0)


def flags_of(tmp_path: Path, name: str, reps: int = 3, seconds: float = 2.0, **kw) -> dict[str, str]:
    """Writes take `seconds` (bandwidth from the layout's bytes), restores 2/3 of that per written byte."""
    study = tmp_path / name
    options = {k: kw.pop(k) for k in ("rank_shift", "restore", "cold_read") if k in kw}
    for rep in range(reps):
        point = make_point(rep=rep, **options)
        bw = point.layout().total_bytes / (1 << 30) / seconds
        write_result(study, point, [bw * (1 + 0.005 * rep)], [1.5 * bw], **kw)
    summary = build_tables(study).summary
    return dict(zip(summary["phase"], summary["flags"], strict=True))


def test_adequacy_flags(tmp_path: Path) -> None:
    plain = flags_of(tmp_path, "plain")  # 2 s per checkpoint
    assert plain == {"write": "", "read": ""}
    short = flags_of(tmp_path, "short", seconds=0.125)
    assert "checkpoint < 1 s" in short["write"]
    few = flags_of(tmp_path, "few", reps=2)
    assert "n = 2 < 3 repetitions" in few["write"]
    shifted = flags_of(tmp_path, "shift", rank_shift=2)
    assert "warm reads: simulated nodes share one page cache" in shifted["read"] and shifted["write"] == ""
    full = flags_of(tmp_path, "full", restore="full")
    assert "warm reads: simulated nodes share one page cache" in full["read"]
    direct = flags_of(tmp_path, "direct", rank_shift=2, cold_read="direct")
    assert direct["read"] == ""  # O_DIRECT reads bypass the shared page cache
    real_nodes = flags_of(tmp_path, "real", rank_shift=2, simulated=False)
    assert real_nodes["read"] == ""
    memory = flags_of(tmp_path, "mem", fstype="tmpfs")
    assert "memory filesystem" in memory["write"] and "memory filesystem" in memory["read"]
    warm = flags_of(tmp_path, "warm", cold_read="none")
    assert "warm reads (cold_read none)" in warm["read"]


def test_wide_interval_is_flagged(tmp_path: Path) -> None:
    study = tmp_path / "noisy"
    for rep, bw in enumerate((1.0, 3.0, 6.0)):
        g = NBYTES / (1 << 30) / 8  # as 8 GiB at 1, 3 and 6 GiB/s: every checkpoint over 1 s
        write_result(study, make_point(rep=rep), [bw * g], [bw * g])
    flags = build_tables(study).summary["flags"]
    assert all("95% CI ±" in f for f in flags)


def test_results_with_the_old_mlperf_names_still_validate(tmp_path: Path) -> None:
    """mlperf_duration_max_s / mlperf_throughput_min_GiBps were renamed (they were not MLPerf's figures)."""
    import json

    study = tmp_path / "old"
    path = write_result(study, make_point(), [2.0], [2.0])
    data = json.loads(path.read_text())
    for summary in data["summary"].values():
        summary["mlperf_duration_max_s"] = summary.pop("duration_max_s")
        summary["mlperf_throughput_min_GiBps"] = summary.pop("rank_bandwidth_min_GiBps")
        del summary["mlperf_duration_s_mean"], summary["mlperf_throughput_GiBps_mean"]
    path.write_text(json.dumps(data))
    tables = build_tables(study)
    assert not tables.problems and len(tables.summary) == 2


def test_mlperf_throughput_is_global_size_over_the_slowest_rank(tmp_path: Path) -> None:
    study = tmp_path / "mlperf"
    write_result(study, make_point(), [2.0], [2.0], spread=0.5)  # ranks' durations differ
    cps = build_tables(study).checkpoints
    row = cps[cps["phase"] == "write"].iloc[0]
    assert row["mlperf_throughput_GiBps"] == pytest.approx(row["bytes"] / (1 << 30) / row["duration_s"])
    assert row["mlperf_throughput_GiBps"] != pytest.approx(row["rank_bandwidth_min_GiBps"])


def test_ranks_without_a_split_are_nan_in_the_table_and_leave_the_cache_readable_by_orjson(tmp_path: Path) -> None:
    """Older results record no split per rank: the ranks table says NaN for them (beside the ranks that have one),
    and the parse cache holds null, not NaN, so orjson reads it back (json took three times as long)."""
    import math

    import orjson

    from studyctl.attempt.paths import StudyPaths

    study = tmp_path / "old-ranks"
    write_result(study, make_point(rep=0), [2.0], [2.0])  # no split: an older worker's result
    write_result(study, make_point(rep=1), [2.0], [2.0], split={"open": 0.1, "fsync": 0.2})
    ranks = build_tables(study).ranks
    for column in ("open_s", "transfer_s", "fsync_s", "close_s", "other_s"):
        assert ranks[column].dtype == "float64"
        by_rep = ranks.groupby("repetition")[column]
        assert by_rep.apply(lambda s: s.isna().all()).tolist() == [True, False]
        assert by_rep.apply(lambda s: s.notna().all()).tolist() == [False, True]
    shards = sorted(StudyPaths(study).results_cache.parent.glob("results.*.json"))
    assert shards
    for shard in shards:
        orjson.loads(shard.read_bytes())  # no NaN in it: orjson refuses NaN
    again = build_tables(study)
    assert again.files_cached == 2 and again.ranks.equals(ranks) and not math.isnan(ranks["fsync_s"].max())
