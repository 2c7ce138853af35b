"""MLPerf Storage rules over result records: each rule can pass and fail, with a reason; figures in GB."""

from __future__ import annotations

import json
from typing import Any

from studyctl.analysis.mlperf import figures, judge, mlperf_view
from studyctl.definition.catalog import lookup
from studyctl.definition.points import CheckpointOptions, Point
from studyctl.definition.result_schema import Result
from tests.resultgen import result_dict

GIB = 1 << 30


def result(model: str = "llama3-8b", rpn: int = 8, zero: int = 3, tp: int = 1, writes: int = 10, reads: int = 10,
           memory: int | None = 64 * GIB, **changes: Any) -> Result:
    options = CheckpointOptions(**{"scale": 1.0, "writes": writes, "reads": reads, **changes.pop("opts", {})})
    point = Point(model=lookup(model), zero_stage=zero, tensor_parallel=tp, nodes=1, ranks_per_node=rpn,
                  filesystem="fast", checkpoint=options)
    data = result_dict(point, [2.0] * writes, [3.0] * reads, nbytes=changes.pop("nbytes", 8 * GIB))
    data["provenance"]["host_memory_bytes"] = memory
    for path, value in changes.items():
        section, key = path.split("__")
        data[section][key] = value
    return Result.model_validate_json(json.dumps(data))


def failed(r: Result, results_mount: str = "/results") -> dict[str, str]:
    return {c.rule: c.why for c in judge(r, results_mount).checks if not c.passed}


def test_closed_shape_with_cleared_cache_passes_every_rule() -> None:
    assert failed(result()) == {}


def test_each_rule_fails_for_its_reason() -> None:
    assert set(failed(result(rpn=2))) == {"processes"}
    assert set(failed(result(zero=1))) == {"layout"}
    assert "scaled to 0.01" in failed(result(opts={"scale": 0.01}))["full size"]
    assert set(failed(result(writes=5, reads=5))) == {"10 writes, 10 reads"}
    assert "no fsync" in failed(result(io__fsync_per_file=False))["fsync"]
    assert "both on /mnt" in failed(result(), results_mount="/mnt")["separate filesystems"]
    cached = failed(result(io__cold_read_method="none"))
    assert set(cached) == {"page cache"} and "two invocations" in cached["page cache"]
    gpt2 = failed(result(model="gpt2-125m"))
    assert "not one of MLPerf's checkpointing models" in gpt2["processes"]


def test_page_cache_rule_waived_when_a_node_wrote_three_times_its_memory() -> None:
    assert failed(result(io__cold_read_method="none", memory=2 * GIB, nbytes=8 * GIB)) == {}
    assert "page cache" in failed(result(io__cold_read_method="none", memory=4 * GIB, nbytes=8 * GIB))


def test_subset_mode_counts_the_full_run_and_needs_one_host_of_eight() -> None:
    subset = result(model="llama3-70b", tp=8, opts={"subset_world_size": 64})
    assert failed(subset) == {}
    assert set(failed(result(model="llama3-70b", tp=8, opts={"subset_world_size": 128}))) == {"processes"}


def test_figures_use_decimal_gb_max_duration_and_size_over_it() -> None:
    r = result(nbytes=10**9)
    f = figures(r)
    write = [c for c in r.checkpoints if c.phase == "write"]
    assert f.checkpoint_GB == 1.0
    assert abs(f.write_duration_s - write[0].duration_max_s) < 1e-12
    assert abs(f.write_throughput_GBps - 1.0 / write[0].duration_max_s) < 1e-9


def test_model_verdict_needs_one_passing_point_and_names_unmet_rules() -> None:
    views = mlperf_view([result(), result(io__fsync_per_file=False), result(model="gpt2-125m", rpn=2)], "/results")
    by = {v.model: v for v in views}
    assert by["llama3-8b"].passed and not by["gpt2-125m"].passed
    assert by["gpt2-125m"].unmet() == ["processes", "layout", "full size"]
    assert by["llama3-8b"].unmet() == []
