"""Expansion: counts, zips, excludes, infeasible layouts, run order and stable point ids."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from studyctl.definition.planning.expand import Exclusion, ExclusionKind, expand, value_matches
from studyctl.definition.planning.sweep import load_sweep, parse_sweep
from studyctl.errors import UserError

BASE = {
    "study": "x",
    "models": ["llama_7b", "llama3-8b"],
    "matrix": {"zero_stage": [1, 3], "nodes": [1, 2, 4], "ranks_per_node": 2},
    "filesystems": {"a": {"path": "/tmp/a"}, "b": {"path": "/tmp/b"}},
    "repetitions": 2,
    "ceilings": "off",  # the measure points alone (test_ceilings adds its own)
}


def sweep_of(**changes: object):
    data = json.loads(json.dumps(BASE))
    data.update(changes)
    return parse_sweep(data, Path("mem.yaml"))


def test_counts_are_the_product_of_axes() -> None:
    points = expand(sweep_of())
    assert len(points) == 2 * 2 * 3 * 2 * 2
    assert len({p.point.point_id for p in points}) == len(points)
    assert not any(p.excluded for p in points)


def test_filesystems_and_repetitions_interleave() -> None:
    points = expand(sweep_of())
    fs_order = [p.point.filesystem for p in points]
    assert fs_order[:4] == ["a", "b", "a", "b"]
    reps = [p.point.repetition for p in points]
    half = len(points) // 2
    assert set(reps[:half]) == {0} and set(reps[half:]) == {1}
    assert [p.order for p in points] == list(range(len(points)))


def test_zip_varies_axes_together() -> None:
    sweep = sweep_of(matrix={"zero_stage": 1, "ranks_per_node": 2},
                     zip=[{"nodes": [1, 2, 4], "tensor_parallel": [1, 2, 2]}], repetitions=1,
                     filesystems={"a": {"path": "/tmp/a"}})
    pairs = {(p.point.nodes, p.point.tensor_parallel) for p in expand(sweep)}
    assert pairs == {(1, 1), (2, 2), (4, 2)}


def test_exclude_partial_match_and_conditions() -> None:
    sweep = sweep_of(exclude=[{"model": "llama3-8b", "zero_stage": 1}, "nodes < 2 and zero_stage == 3",
                              {"nodes": ">= 4", "filesystem": ["b"], "reason": "b is small"}])
    points = expand(sweep)
    excluded = {p.point.point_id: p.exclude_reason for p in points if p.excluded}
    for p in points:
        pt = p.point
        rule1 = pt.model.name == "llama3-8b" and pt.zero_stage == 1
        rule2 = pt.nodes < 2 and pt.zero_stage == 3
        rule3 = pt.nodes >= 4 and pt.filesystem == "b"
        assert p.excluded == (rule1 or rule2 or rule3), pt
    assert "b is small" in excluded.values()
    assert all(p.exclusion.kind is ExclusionKind.RULE for p in points if p.excluded)
    assert any(r.startswith("exclude rule 1") for r in excluded.values())
    assert "nodes < 2 and zero_stage == 3" in excluded.values()


def test_infeasible_layouts_are_flagged_with_reasons() -> None:
    sweep = sweep_of(matrix={"zero_stage": [3], "nodes": [1], "ranks_per_node": 3, "pipeline_parallel": [2]},
                     repetitions=1)
    points = expand(sweep)
    assert points and all(p.excluded for p in points)
    assert all(p.exclusion.kind is ExclusionKind.INFEASIBLE for p in points)
    reason = points[0].exclude_reason
    assert reason.startswith("infeasible")
    assert not points[0].exclusion.reason.startswith("infeasible")
    assert "ZeRO-3 with pipeline_parallel > 1" in reason
    assert "not a multiple" in reason


def test_ids_are_stable_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent("""\
        study: stable
        models: [gpt2-125m]
        matrix: {zero_stage: [0, 3], nodes: [1, 2]}
        filesystems: {a: {path: /tmp/a}}
        """))
    code = ("import sys; from pathlib import Path; from studyctl.definition.planning.sweep import load_sweep; "
            "from studyctl.definition.planning.expand import expand; "
            "print(','.join(p.point.point_id for p in expand(load_sweep(Path(sys.argv[1])))))")
    runs = {subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin"}).stdout
            for seed in (1, 2)}
    assert len(runs) == 1
    assert runs.pop().strip().split(",") == [p.point.point_id for p in expand(load_sweep(path))]


def test_changing_a_point_config_changes_its_id_but_not_paths() -> None:
    a = {p.point.point_id for p in expand(sweep_of())}
    moved = {p.point.point_id for p in expand(sweep_of(filesystems={"a": {"path": "/other"}, "b": {"path": "/x"}}))}
    assert a == moved  # a filesystem's path is where, not what: fixing it keeps the point
    scaled = {p.point.point_id for p in expand(sweep_of(checkpoint={"scale": 0.5}))}
    assert not a & scaled


def test_aliases_that_collide_are_rejected() -> None:
    with pytest.raises(UserError, match="same point twice"):
        expand(sweep_of(matrix={"zero_stage": ["ddp", 0]}))


@pytest.mark.parametrize(("actual", "wanted", "hit"), [
    (2, "< 4", True), (4, "< 4", False), (4, ">= 4", True), ("direct", "== direct", True),
    ("direct", "!= direct", False), (3, [1, 3], True), (0, "ddp", True), (1, "fsdp", False),
])
def test_value_matching(actual: object, wanted: object, hit: bool) -> None:
    axis = "zero_stage" if wanted in ("ddp", "fsdp") else "nodes"
    assert value_matches(axis, actual, wanted) is hit


def test_checkpoint_option_axes() -> None:
    sweep = sweep_of(matrix={"zero_stage": 1, "block_mib": [4, 16], "io_mode": ["buffered", "direct"]},
                     checkpoint={"buffer_mib": 16}, repetitions=1)
    points = expand(sweep)
    assert {(p.point.checkpoint.block_mib, p.point.io_mode) for p in points} == {
        (4, "buffered"), (16, "buffered"), (4, "direct"), (16, "direct")}
    assert all(p.point.checkpoint.buffer_mib == 16 for p in points)


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[2] / "sweeps").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_sweep_expands_to_runnable_points(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "someone")  # cluster sweeps name their paths with $USER
    monkeypatch.setenv("STUDYCTL_S3_ENDPOINT", "http://127.0.0.1:8333")  # quickstart-s3: the server's env file
    sweep = load_sweep(path)
    runnable = [p for p in expand(sweep) if not p.excluded]
    assert runnable and {p.point.repetition for p in runnable} == set(range(sweep.repetitions))


def test_fast_canonical_json_equals_the_plain_one() -> None:
    for p in expand(sweep_of(checkpoint={"scale": 0.25, "cold_read": "fadvise"})):
        point = p.point
        full = json.dumps(point.canonical(), sort_keys=True, separators=(",", ":"))
        assert point.canonical_json() == full


def test_a_rule_wins_over_infeasibility_and_keeps_its_kind() -> None:
    """A point both excluded by a rule and infeasible is shown with the user's reason, kind rule."""
    sweep = sweep_of(matrix={"zero_stage": [3], "nodes": [1], "ranks_per_node": 2, "pipeline_parallel": [2]},
                     exclude=[{"zero_stage": 3, "reason": "no ZeRO-3 here"}], repetitions=1)
    points = expand(sweep)
    assert points and all(p.exclusion == Exclusion(ExclusionKind.RULE, "no ZeRO-3 here") for p in points)
