"""MLPerf Storage rules over result records, under v2.0 and v3.0: each rule can pass, fail (and where studyctl
cannot tell, be unknown) with a reason; the editions differ where their texts do; figures in GB."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from studyctl.analysis.mlperf.checks import CHECKS
from studyctl.analysis.mlperf.rules import RULE_SETS, rule_set
from studyctl.analysis.mlperf.view import Where, figures, judge, mlperf_view
from studyctl.definition.checkpoint.points import CheckpointOptions, Point
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.result.result_schema import Result
from studyctl.errors import UserError
from tests.resultgen import result_dict

GIB = 1 << 30
V2, V3 = RULE_SETS["v2.0"], RULE_SETS["v3.0"]
S3 = {"fast": {"kind": "s3", "path": "s3://studyctl/ckpt", "endpoint": "http://127.0.0.1:8333"}}


def result(model: str = "llama3-8b", rpn: int = 8, nodes: int = 1, zero: int = 3, tp: int = 1, writes: int = 10,
           reads: int = 10, memory: int | None = 64 * GIB, nominal: int = 105 * 10**9, **changes: Any) -> Result:
    options = CheckpointOptions(**{"scale": 1.0, "writes": writes, "reads": reads, **changes.pop("opts", {})})
    point = Point(model=lookup(model), zero_stage=zero, tensor_parallel=tp, nodes=nodes, ranks_per_node=rpn,
                  filesystem="fast", checkpoint=options)
    data = result_dict(point, [2.0] * writes, [3.0] * reads, nbytes=changes.pop("nbytes", 8 * GIB))
    data["provenance"]["host_memory_bytes"] = memory
    data["sizes"]["nominal_checkpoint_bytes"] = nominal
    for path, value in changes.items():
        section, key = path.split("__")
        data[section][key] = value
    return Result.model_validate_json(json.dumps(data))


def verdicts(r: Result, rules: Any = V2, mount: str = "/results", filesystems: Any = None) -> dict[str, str]:
    """rule → verdict for every rule that did not pass."""
    checks = judge(r, rules, Where(mount, filesystems or {})).checks
    return {c.rule: c.verdict for c in checks if c.verdict != "pass"}


def why(r: Result, rule: str, rules: Any = V2, mount: str = "/results", filesystems: Any = None) -> str:
    return next(c.why for c in judge(r, rules, Where(mount, filesystems or {})).checks if c.rule == rule)


def test_closed_shape_passes_v2_and_leaves_only_the_accelerator_unknown_in_both() -> None:
    r = result()
    assert verdicts(r, V2) == {"accelerator memory": "unknown"}
    assert verdicts(r, V3) == {"accelerator memory": "unknown"}
    assert "b200: 8 × 180 GB = 1440 GB" in why(r, "accelerator memory", V3)
    assert "h100: 8 × 80 GB = 640 GB" in why(r, "accelerator memory", V2)


@pytest.mark.parametrize("rules", [V2, V3], ids=["v2.0", "v3.0"])
def test_each_rule_fails_for_its_reason(rules: Any) -> None:
    def failed(r: Result, mount: str = "/results") -> set[str]:
        return {k for k, v in verdicts(r, rules, mount).items() if v == "fail"}

    assert failed(result(rpn=2)) == {"processes", "processes per host"}
    assert failed(result(rpn=4)) == {"processes"}  # 4 per host is allowed, 4 in all is not
    assert failed(result(rpn=4, nodes=2)) == set()
    assert failed(result(zero=1)) == {"layout"}
    assert "scaled to 0.01" in why(result(opts={"scale": 0.01}), "full size", rules)
    assert failed(result(writes=5, reads=5)) == {"10 writes, 10 reads"}
    assert "no fsync" in why(result(io__fsync_per_file=False), "fsync", rules)
    assert failed(result(), mount="/mnt") == {"separate filesystems"}
    cached = result(io__cold_read_method="none")
    assert failed(cached) == {"page cache"} and "two invocations" in why(cached, "page cache", rules)
    assert "not one of MLPerf's checkpointing models" in why(result(model="gpt2-125m"), "processes", rules)


def test_page_cache_rule_waived_when_a_node_wrote_three_times_its_memory() -> None:
    assert "page cache" not in verdicts(result(io__cold_read_method="none", memory=2 * GIB, nbytes=8 * GIB))
    assert "page cache" in verdicts(result(io__cold_read_method="none", memory=4 * GIB, nbytes=8 * GIB))


def test_an_unknown_results_filesystem_is_unknown_not_failed() -> None:
    assert verdicts(result(), V3, mount=None)["separate filesystems"] == "unknown"  # type: ignore[arg-type]


def test_subset_mode_v2_allows_larger_models_v3_only_8b() -> None:
    big = result(model="llama3-70b", tp=8, opts={"subset_world_size": 64})
    assert "subset mode" not in verdicts(big, V2)
    assert verdicts(big, V3)["subset mode"] == "fail" and "allowed for llama3-8b" in why(big, "subset mode", V3)
    small = result(opts={"subset_world_size": 8})
    assert verdicts(small, V2)["subset mode"] == "fail" and "subset mode" not in verdicts(small, V3)
    two_hosts = result(model="llama3-70b", tp=8, rpn=4, nodes=2, opts={"subset_world_size": 64})
    assert verdicts(two_hosts, V2)["subset mode"] == "fail"
    assert verdicts(result(model="llama3-70b", tp=8, opts={"subset_world_size": 128}), V2) == {
        "processes": "fail", "accelerator memory": "unknown"}


def test_object_storage_is_v3_only_and_judged_by_its_own_nature() -> None:
    r = result(io__cold_read_method="none", io__fsync_per_file=False)
    assert verdicts(r, V2, mount="/mnt", filesystems=S3) == {
        "storage API": "fail", "fsync": "fail", "accelerator memory": "unknown"}
    assert verdicts(r, V3, mount="/mnt", filesystems=S3) == {"accelerator memory": "unknown"}
    assert "object reads" in why(r, "page cache", V3, filesystems=S3)
    assert "PUT" in why(r, "fsync", V3, filesystems=S3)
    assert "future" not in why(r, "storage API", V3, filesystems=S3)


def test_object_storage_found_from_the_result_path_and_its_endpoint_must_be_declared() -> None:
    r = result(filesystem__path="s3://bucket/prefix/s.key")
    assert verdicts(r, V2)["storage API"] == "fail"
    assert verdicts(r, V3)["backend settings declared"] == "unknown"
    assert "not the sweep" in why(r, "backend settings declared", V3)
    assert "backend settings declared" not in verdicts(result(), V3)  # POSIX: nothing to declare
    assert verdicts(result(filesystem__fstype="s3"), V2)["storage API"] == "fail"


def test_accelerator_memory_fails_only_where_no_accelerator_could_hold_the_checkpoint() -> None:
    one = result(rpn=1, nominal=105 * 10**9)  # 1 × 80 GB < 105 GB; 1 × 288 GB ≥ 105 GB
    assert verdicts(one, V2)["accelerator memory"] == "fail"
    assert verdicts(one, V3)["accelerator memory"] == "unknown"
    assert verdicts(result(rpn=1, nominal=300 * 10**9), V3)["accelerator memory"] == "fail"


def test_rules_option_names_the_allowed_values() -> None:
    with pytest.raises(UserError, match=r"--rules 'v4\.0': expected one of v2\.0, v3\.0") as exc:
        rule_set("v4.0")
    assert exc.value.exit_code == 2 and rule_set("v3.0") is V3


def test_every_rule_is_a_row_with_a_source_and_a_check_taking_its_parameters() -> None:
    for rules in RULE_SETS.values():
        assert len({r.name for r in rules.rules}) == len(rules.rules)
        for rule in rules.rules:
            params = inspect.signature(CHECKS[rule.check]).parameters
            assert set(rule.params) == set(list(params)[2:]), rule
            assert rules.edition in rule.source, rule
    assert [r.name for r in V2.rules] == [r.name for r in V3.rules][:len(V2.rules)]


def test_figures_use_decimal_gb_max_duration_and_size_over_it() -> None:
    r = result(nbytes=10**9)
    f = figures(r)
    write = [c for c in r.checkpoints if c.phase == "write"]
    assert f.checkpoint_GB == 1.0
    assert f.write_duration_s is not None and f.write_throughput_GBps is not None
    assert abs(f.write_duration_s - write[0].duration_max_s) < 1e-12
    assert abs(f.write_throughput_GBps - 1.0 / write[0].duration_max_s) < 1e-9


def test_model_verdict_takes_the_best_point_and_names_unmet_and_unknown_rules() -> None:
    views = mlperf_view([result(), result(io__fsync_per_file=False), result(model="gpt2-125m", rpn=2)], V3,
                        Where("/results"))
    by = {v.model: v for v in views}
    assert by["llama3-8b"].status == "unknown" and by["gpt2-125m"].status == "fail"
    assert by["llama3-8b"].best.point_id == views[0].points[0].point_id
    assert by["gpt2-125m"].unmet() == ["processes", "layout", "full size", "processes per host"]
    assert by["llama3-8b"].unmet() == [] and by["llama3-8b"].unknown() == ["accelerator memory"]
    assert by["llama3-8b"].summary() == ("meets CLOSED as far as studyctl can tell v3.0 "
                                         "(unknown: accelerator memory)")
    assert by["gpt2-125m"].summary().startswith("does not meet CLOSED v3.0 (no point met: processes, layout")


def test_points_that_differ_in_a_setting_beyond_the_shape_are_told_apart_by_it() -> None:
    """Two engines × two strategies on one shape: each label names its engine and strategy; a sync point's absent
    step settings follow its strategy and are not named; a study varying nothing else keeps the shape alone."""
    grid = [result(opts={"engine": engine, "strategy": strategy, **({"step_s": 0.05} if strategy == "async" else {})})
            for engine in ("stream", "dcp") for strategy in ("sync", "async")]
    [view] = mlperf_view(grid, V3, Where("/results", {}))
    labels = [p.label for p in view.points]
    assert len(set(labels)) == 4
    assert labels[0].endswith(", engine stream, strategy sync") and labels[3].endswith(", engine dcp, strategy async")
    assert not any("step_s" in label or "compute" in label for label in labels)
    [alone] = mlperf_view([result(), result(zero=1)], V3, Where("/results", {}))
    assert [p.label.count(",") for p in alone.points] == [0, 0]
