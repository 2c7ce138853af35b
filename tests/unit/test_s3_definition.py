"""Filesystems of kind s3 in a sweep: the form, one-line refusals naming file and key, the points an object store
cannot run, request counts a plan shows, and what a point's objects are keyed by."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.definition.checkpoint.layout import rank_files
from studyctl.definition.checkpoint.objects import object_point_problems, read_requests, write_requests
from studyctl.definition.checkpoint.places import point_places
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import object_requests, plan_row
from studyctl.definition.planning.sweep import load_sweep
from studyctl.units import MIB
from tests.unit.test_sweep import error_of, write

S3 = """\
study: s3
models: [gpt2-125m]
matrix:
  zero_stage: 1
  ranks_per_node: 2
  io_mode: [buffered, direct]
filesystems:
  disk: {path: /tmp}
  objects: {path: "s3://studyctl/ckpt/", kind: s3, endpoint: "http://127.0.0.1:8333", addressing: path}
checkpoint: {scale: 0.05, part_mib: 8}
ceilings: on
"""


def test_s3_filesystem_form_and_points(tmp_path) -> None:
    sweep = load_sweep(write(tmp_path, S3))
    fs = sweep.filesystems["objects"]
    assert fs.path == "s3://studyctl/ckpt" and fs.object_store is not None and sweep.filesystems["disk"].object_store \
        is None
    assert fs.object_store.endpoint == "http://127.0.0.1:8333" and fs.object_store.region == "us-east-1"
    points = expand(sweep)
    on_s3 = [p for p in points if p.point.filesystem == "objects"]
    assert {(p.point.io_mode, p.excluded) for p in on_s3} == {("buffered", False), ("direct", True)}
    refused = next(p for p in on_s3 if p.excluded)
    assert "no O_DIRECT" in refused.exclude_reason and "objects" in refused.exclude_reason
    ceilings = [p for p in points if p.point.role == "ceiling"]
    assert ceilings and all(p.point.filesystem == "disk" for p in ceilings), "no POSIX probes on an object store"


def test_dcp_points_on_an_object_store_are_refused_at_plan_time() -> None:
    """DCP writes a directory: its points on an object store are excluded with the reason, those on disk kept."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        points = expand(load_sweep(write(Path(tmp), S3.replace("part_mib: 8}", "part_mib: 8, engine: dcp}"))))
    measured = [p for p in points if p.point.role == "measure" and p.point.io_mode == "buffered"]
    on_s3 = [p for p in measured if p.point.filesystem == "objects"]
    assert on_s3 and all(p.excluded and "engine dcp on filesystem kind s3" in p.exclude_reason for p in on_s3)
    assert all(not p.excluded for p in measured if p.point.filesystem == "disk")


@pytest.mark.parametrize(("change", "fragments"), [
    (("kind: s3, endpoint", "kind: local, endpoint"), ["filesystems.objects", "kind", "s3"]),
    (('"s3://studyctl/ckpt/"', "/tmp/y"), ["filesystems.objects", "path", "s3://BUCKET"]),
    (('"s3://studyctl/ckpt/"', '"s3://Bad_Bucket/x"'), ["filesystems.objects.path", "Bad_Bucket", "bucket"]),
    (('"http://127.0.0.1:8333"', '"http://key:secret@127.0.0.1:8333"'), ["filesystems.objects.endpoint", "no user"]),
    (("addressing: path", "addressing: dns"), ["filesystems.objects.addressing", "path", "virtual"]),
    (("disk: {path: /tmp}", "disk: {path: /tmp, region: eu-west-1}"), ["filesystems.disk", "region", "kind s3"]),
    (("objects: {", "objects: {secret_key: x, "), ["filesystems.objects.secret_key"]),
    (('"http://127.0.0.1:8333"', '"${STUDYCTL_NO_SUCH_VARIABLE}"'),
     ["filesystems.objects.endpoint", "STUDYCTL_NO_SUCH_VARIABLE is not set"]),
])
def test_bad_s3_filesystem_is_one_line_naming_file_and_key(tmp_path, change, fragments) -> None:
    message = error_of(tmp_path, S3.replace(*change))
    assert "s.yaml" in message
    for fragment in fragments:
        assert fragment in message, message
    assert "key:secret" not in message


def test_object_points_refuse_what_has_no_meaning_there() -> None:
    assert object_point_problems("buffered", CheckpointOptions()) == ()
    assert "O_DIRECT" in object_point_problems("hybrid", CheckpointOptions())[0]
    assert "page cache" in object_point_problems("buffered", CheckpointOptions(cold_read="fadvise"))[0]
    assert "buffer_mib" in object_point_problems("buffered", CheckpointOptions(part_mib=32, buffer_mib=16,
                                                                                block_mib=16))[0]
    (dcp,) = object_point_problems("buffered", CheckpointOptions(engine="dcp"))
    assert "checkpoint.engine dcp" in dcp and "kind s3" in dcp
    assert object_point_problems("buffered", CheckpointOptions(engine="torch_save")) == ()


def test_request_counts_follow_the_part_size() -> None:
    sizes = [16 * MIB, 40 * MIB, 0, MIB]
    w = write_requests(sizes, 16)
    assert (w.objects, w.put, w.part) == (4, 1 + 2 + 1 + 1, 3)  # 40 MiB: initiate + complete, 3 parts
    assert read_requests(sizes, 16).get == 1 + 3 + 0 + 1
    model, point = lookup("gpt2-125m"), Point(model=lookup("gpt2-125m"), zero_stage=1, ranks_per_node=2,
                                              filesystem="objects", checkpoint=CheckpointOptions(scale=0.05))
    par = point.parallelism
    for part in (5, 16, 64):
        opts = point.checkpoint.model_copy(update={"part_mib": part})
        got = object_requests(model, par, opts)
        per_rank = [write_requests([f.nbytes for f in rank_files(model, par, r, 0.05)], part) for r in range(2)]
        assert got.objects_per_checkpoint == sum(r.objects for r in per_rank)
        assert got.part_requests_per_checkpoint == sum(r.part for r in per_rank)
        assert got.write_requests_per_rank_max == max(r.put + r.part for r in per_rank)
    small = object_requests(model, par, point.checkpoint.model_copy(update={"part_mib": 5}))
    large = object_requests(model, par, point.checkpoint.model_copy(update={"part_mib": 64}))
    assert small.part_requests_per_checkpoint > large.part_requests_per_checkpoint
    assert small.get_requests_per_restore > large.get_requests_per_restore


def test_plan_rows_show_requests_only_for_object_stores(tmp_path) -> None:
    sweep = load_sweep(write(tmp_path, S3))
    rows = {(r.filesystem, r.io_mode): r for r in (plan_row(pp, sweep) for pp in expand(sweep))
            if r.role == "measure"}
    disk, objects = rows[("disk", "buffered")], rows[("objects", "buffered")]
    assert disk.objects is None and disk.cold_read == "fadvise"
    counts = objects.objects
    assert counts is not None and objects.sized is not None and objects.cold_read == "no_cache"
    assert counts.objects_per_checkpoint == objects.sized.files_per_checkpoint
    assert counts.put_requests_per_checkpoint >= counts.objects_per_checkpoint


def test_new_options_keep_old_point_ids() -> None:
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, filesystem="x")
    assert "part_mib" not in point.canonical_json() and "s3_concurrency" not in point.canonical_json()
    changed = point.model_copy(update={"checkpoint": CheckpointOptions(part_mib=8)})
    assert changed.point_id != point.point_id


def test_a_points_objects_are_below_the_studys_own_prefix(tmp_path) -> None:
    sweep = load_sweep(write(tmp_path, S3))
    store = sweep.filesystems["objects"].object_store
    a = point_places("s3.aaaa1111", "0123456789ab", "s3://studyctl/ckpt", None, store)[0]
    b = point_places("s3.bbbb2222", "0123456789ab", "s3://studyctl/ckpt", None, store)[0]
    assert a.problem() is None and a.object_key != b.object_key and a.object_key.endswith("/0123456789ab/")
    task = WorkerTask(study="s3", point_id="0123456789ab", point=Point(model=lookup("gpt2-125m"), zero_stage=1,
                      filesystem="objects"), filesystem_path="s3://studyctl/ckpt", data_key="aaaa1111",
                      object_store=store, result_path="/r", error_path="/e")
    assert task.places[0] == a
