"""Limits plan checks before anything runs: worlds over MAX_RANKS (one line naming file, key, value and the
maximum), and what S3 would refuse of a point's objects (parts per object, key length), with the same constants
the client and the worker use; a recorded worker reason keeps its cause however long it is."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from studyctl.definition.checkpoint.layout import rank_files, step_dir_name
from studyctl.definition.checkpoint.objects import parts_of, place_target, smallest_part_mib
from studyctl.definition.checkpoint.points import CheckpointOptions, WorkerTask
from studyctl.definition.inputs.catalog import CATALOG
from studyctl.definition.inputs.filesystems import ObjectStoreSpec
from studyctl.definition.inputs.worlds import MAX_RANKS
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.planned import PlannedPoint
from studyctl.definition.planning.sweep import load_sweep
from studyctl.errors import UserError
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import ObjectStoreError
from studyctl.objstore.limits import MAX_KEY_BYTES, MAX_PART_BYTES, MAX_PARTS, MIN_PART_BYTES
from studyctl.units import MIB, format_bytes
from worker.io import Split
from worker.objects import ObjectStore
from worker.record import MAX_REASON_CHARS, write_error

SWEEP = """\
study: limits
models: [llama_7b]
matrix:
  zero_stage: 3
  nodes: 2
  ranks_per_node: 2
  recovery: [none]
filesystems:
  disk: {path: /tmp}
checkpoint: {scale: 0.01, writes: 1, reads: 1}
ceilings: off
calibration: off
"""
HUGE = 2**63


def refusal(tmp_path: Path, text: str) -> str:
    """The one-line usage error of planning `text` (read and expanded, as `studyctl plan` does)."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        expand(load_sweep(path))
    assert info.value.exit_code == 2
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


@pytest.mark.parametrize(("old", "new", "key", "value"), [
    ("recovery: [none]", f"recovery: [{{grow_to: {HUGE}}}]", "matrix.recovery.0: grow_to", HUGE),
    ("recovery: [none]", f"recovery: [{{shrink_to: {MAX_RANKS + 1}}}]", "matrix.recovery.0: shrink_to", MAX_RANKS + 1),
    ("recovery: [none]", f"recovery: [{{grow_to: 8, tensor_parallel: {HUGE}}}]",
     "matrix.recovery.0: tensor_parallel", HUGE),
    ("nodes: 2", f"nodes: [2, {MAX_RANKS + 1}]", "matrix.nodes.1", MAX_RANKS + 1),
    ("ranks_per_node: 2", f"ranks_per_node: {HUGE}", "matrix.ranks_per_node.0", HUGE),
    ("zero_stage: 3", f"zero_stage: 3\n  tensor_parallel: {HUGE}", "matrix.tensor_parallel.0", HUGE),
    ("zero_stage: 3", f"zero_stage: 1\n  pipeline_parallel: {MAX_RANKS * 2}", "matrix.pipeline_parallel.0",
     MAX_RANKS * 2),
    ("  nodes: 2\n", "", "zip.0: nodes", HUGE),  # the value in a zip group (below)
    ("ranks_per_node: 2", f"ranks_per_node: {MAX_RANKS // 512}\n  nodes: 1024", "matrix: nodes × ranks_per_node",
     1024 * (MAX_RANKS // 512)),  # each within the bound, their product not
    ("writes: 1,", f"writes: 1, subset_world_size: {HUGE},", "checkpoint.subset_world_size", HUGE),
])
def test_a_world_over_the_maximum_is_refused_in_one_line(tmp_path: Path, old: str, new: str, key: str,
                                                        value: int) -> None:
    text = SWEEP.replace(old, new)
    if key.startswith("zip"):
        text += f"zip:\n  - {{nodes: [1, {HUGE}], io_mode: [buffered, direct]}}\n"
    if key.startswith("matrix: nodes"):
        text = text.replace("  nodes: 2\n", "")
    message = refusal(tmp_path, text)
    assert key in message and f"{value:,}" in message and f"{MAX_RANKS:,}" in message


def test_a_world_at_the_maximum_plans(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP.replace("recovery: [none]", f"recovery: [{{grow_to: {MAX_RANKS}}}]").replace(
        "zero_stage: 3", "zero_stage: 1"))
    (point,) = expand(load_sweep(path))
    assert point.point.recovery is not None and point.point.recovery.world_size == MAX_RANKS


S3_SWEEP = """\
study: s3limits
models: [llama_7b]
matrix:
  zero_stage: 3
  nodes: 1
  ranks_per_node: 1
filesystems:
  objects: {path: "s3://studyctl/PREFIX", kind: s3, endpoint: "http://127.0.0.1:8333"}
checkpoint: {scale: 1.0, writes: 2, reads: 1, buffer_mib: 64, part_mib: PART}
ceilings: off
calibration: off
"""


def s3_point(tmp_path: Path, part_mib: int, prefix: str = "ckpt") -> PlannedPoint:
    path = tmp_path / "s3.yaml"
    path.write_text(S3_SWEEP.replace("PREFIX", prefix).replace("PART", str(part_mib)))
    (point,) = expand(load_sweep(path))
    return point


def test_an_object_of_more_parts_than_s3_takes_is_refused_with_the_part_size_that_fits(tmp_path: Path) -> None:
    files = rank_files(CATALOG["llama_7b"], s3_point(tmp_path, 5).point.parallelism, 0)
    largest = max(files, key=lambda f: f.nbytes)
    part_mib = MIN_PART_BYTES // MIB
    assert parts_of(largest.nbytes, part_mib * MIB) > MAX_PARTS  # the case: S3 would fail it mid-upload
    reason = s3_point(tmp_path, part_mib).exclude_reason or ""
    fits = smallest_part_mib(largest.nbytes)
    assert reason.startswith("infeasible: filesystem objects (kind s3): ") and "\n" not in reason
    for words in (largest.name, format_bytes(largest.nbytes), f"part_mib {part_mib}",
                  f"{parts_of(largest.nbytes, part_mib * MIB):,} parts", f"{MAX_PARTS:,}",
                  f"smallest part_mib that fits is {fits}"):
        assert words in reason
    assert s3_point(tmp_path, fits).exclusion is None  # the suggestion plans
    assert "parts" in (s3_point(tmp_path, fits - 1).exclude_reason or "")


def test_the_part_size_that_fits_asks_for_a_buffer_that_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "s3.yaml"
    path.write_text(S3_SWEEP.replace("PREFIX", "ckpt").replace("PART", "5").replace("buffer_mib: 64",
                                                                                    "buffer_mib: 6, block_mib: 4"))
    (point,) = expand(load_sweep(path))
    assert "(and buffer_mib at least as large: a part is a slice of the rank's buffer)" in (point.exclude_reason or "")


def test_a_key_longer_than_s3_takes_is_refused_naming_its_long_part(tmp_path: Path) -> None:
    prefix = "p" * (MAX_KEY_BYTES - 40)
    planned = s3_point(tmp_path, 16, prefix)
    point = planned.point
    task = WorkerTask(study="s3limits", point_id=point.point_id, point=point, data_key="aaaa1111",
                      filesystem_path=f"s3://studyctl/{prefix}", object_store=planned_store(tmp_path, prefix),
                      result_path="/r", error_path="/e")
    step = step_dir_name(point.checkpoint.writes - 1, point.checkpoint.naming)
    longest = max(len(place_target(task.places[0]).key(f"{step}/{f.name}").encode())
                  for f in rank_files(point.model, point.parallelism, 0))
    reason = planned.exclude_reason or ""
    assert longest > MAX_KEY_BYTES and "\n" not in reason
    assert f"object keys of {longest:,} bytes, over S3's {MAX_KEY_BYTES:,}" in reason  # as the worker builds them
    assert f"its longest part is the filesystem's prefix ({len(prefix):,} bytes)" in reason
    assert s3_point(tmp_path, 16, "ckpt").exclusion is None


def planned_store(tmp_path: Path, prefix: str) -> ObjectStoreSpec | None:
    path = tmp_path / "store.yaml"
    path.write_text(S3_SWEEP.replace("PREFIX", prefix).replace("PART", "16"))
    return load_sweep(path).filesystems["objects"].object_store


@given(st.integers(1, 5 * 2**40))
def test_the_smallest_part_size_that_fits_is_the_smallest(nbytes: int) -> None:
    fits = smallest_part_mib(nbytes)
    assert parts_of(nbytes, fits * MIB) <= MAX_PARTS
    assert fits == MIN_PART_BYTES // MIB or parts_of(nbytes, (fits - 1) * MIB) > MAX_PARTS


def test_the_part_size_bounds_are_s3s() -> None:
    for part_mib in (MIN_PART_BYTES // MIB - 1, MAX_PART_BYTES // MIB + 1):
        with pytest.raises(ValidationError):
            CheckpointOptions(part_mib=part_mib)
    assert CheckpointOptions(part_mib=MAX_PART_BYTES // MIB).part_mib == MAX_PART_BYTES // MIB


def test_a_long_recorded_reason_keeps_its_cause(tmp_path: Path) -> None:
    """A failed PUT names the target and the key (twice over, with a long key) before the cause."""
    key = "k" * 1500
    reason = f"s3://studyctl/{key} at http://127.0.0.1:8333: PUT {key}: KeyTooLongError (Your key is too long.)"
    point = s3_point(tmp_path, 16).point
    task = WorkerTask(study="s", point_id=point.point_id, point=point, filesystem_path="/tmp",
                      result_path=str(tmp_path / "r.json"), error_path=str(tmp_path / "e.json"))
    write_error(task, "io_error", textwrap.fill(reason, 80))
    recorded = json.loads((tmp_path / "e.json").read_text())["reason"]
    assert len(recorded) <= MAX_REASON_CHARS and "\n" not in recorded
    assert recorded.startswith("s3://studyctl/kkk") and recorded.endswith("KeyTooLongError (Your key is too long.)")


@pytest.mark.parametrize("what", ["parts", "key"])
def test_the_worker_refuses_what_s3_would_before_any_request(tmp_path: Path, what: str) -> None:
    """A point plan let through by mistake: its rank's PUT fails at once with the limit, not after 48.8 GiB."""
    planned = s3_point(tmp_path, MIN_PART_BYTES // MIB)
    task = WorkerTask(study="s3limits", point_id=planned.point.point_id, point=planned.point, data_key="aaaa1111",
                      filesystem_path="s3://studyctl/ckpt", object_store=planned_store(tmp_path, "ckpt"),
                      result_path="/r", error_path="/e")
    store = ObjectStore(task)
    try:
        nbytes = (MAX_PARTS + 1) * MIN_PART_BYTES if what == "parts" else MIB
        name = "f" if what == "parts" else "f" * MAX_KEY_BYTES
        with pytest.raises(ObjectStoreError) as info:
            store.put(store.key("step", name), memoryview(bytearray(MIB)), nbytes, Split())
    finally:
        store.close()
    words = f"{MAX_PARTS + 1:,} parts, over S3's {MAX_PARTS:,}" if what == "parts" else f"over S3's {MAX_KEY_BYTES:,}"
    assert words in info.value.reason and "s3://studyctl/ckpt" in info.value.reason
    assert store.counts == RequestCounts()  # no request was made
