"""The object storage on the project's S3 server: the engines' streams as multipart uploads and ranged GETs
(a torch.save / torch.load round trip, request counts as documented), a failed write aborting its upload and
leaving no object, list_step, and a file written from the cycling buffer read back whole."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.inputs.filesystems import ObjectStoreSpec
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target
from tests import storage_streams as checks
from tests.s3.server import BUCKET, Server
from worker.storage import open_storage
from worker.storage.objects import ObjectStorage

pytestmark = pytest.mark.s3
MIB = 1 << 20
PART_MIB = 5


@pytest.fixture
def storage(tmp_path: Path, s3_server: Server) -> Iterator[ObjectStorage]:
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=1, ranks_per_node=1, filesystem="objects",
                  checkpoint=CheckpointOptions(scale=0.01, buffer_mib=16, block_mib=4, part_mib=PART_MIB,
                                               s3_concurrency=3))
    task = WorkerTask(study="st", point_id=point.point_id, point=point, data_key="k",
                      filesystem_path=f"s3://{BUCKET}/tests/{uuid.uuid4().hex[:10]}", filesystem_kind="s3",
                      object_store=ObjectStoreSpec(endpoint=s3_server.endpoint),
                      result_path=str(tmp_path / "result.json"), error_path=str(tmp_path / "error.json"))
    chosen = open_storage(task, 0)
    assert isinstance(chosen, ObjectStorage)
    assert chosen.decide(0).error is None
    yield chosen
    chosen.remove_point()
    chosen.close()


def test_torch_save_into_a_multipart_upload_loads_back(storage: ObjectStorage) -> None:
    counts = storage.store.counts = RequestCounts()
    size = checks.torch_round_trip(storage, "mp_rank_00_model_states.pt", 12)
    parts = -(-size // (PART_MIB * MIB))
    assert parts >= 3
    assert (counts.put, counts.part) == (2, parts)  # initiate + complete, one UploadPart per part
    assert storage.step_path(checks.STEP) is None


def test_an_object_within_one_part_is_one_put(storage: ObjectStorage) -> None:
    counts = storage.store.counts = RequestCounts()
    checks.raw_round_trip(storage, "small.bin", PART_MIB * MIB)
    assert (counts.put, counts.part) == (1, 0)


def test_raw_bytes_and_seeks_through_the_streams(storage: ObjectStorage) -> None:
    checks.raw_round_trip(storage, "raw.bin", 3 * PART_MIB * MIB + 12345)


def test_a_failed_write_aborts_its_upload_and_leaves_no_object(storage: ObjectStorage, s3_server: Server) -> None:
    checks.failed_write_leaves_nothing(storage, "half.pt", 2 * PART_MIB * MIB + 1)
    target = storage.store.target
    with ObjectClient(S3Target(BUCKET, endpoint=s3_server.endpoint), 1, PART_MIB * MIB) as client:
        uploads = client.calls.client.list_multipart_uploads(Bucket=BUCKET, Prefix=target.prefix + "/")
    assert not uploads.get("Uploads"), uploads.get("Uploads")


def test_list_step_names_what_an_engine_wrote(storage: ObjectStorage) -> None:
    storage.prepare_step(checks.STEP)
    for name, n in (("__1_0.distcp", 10), ("__0_0.distcp", 20), (".metadata", 3)):
        with storage.open_write(checks.STEP, name) as out:
            out.write(b"a" * n)
    assert storage.list_step(checks.STEP) == [(".metadata", 3), ("__0_0.distcp", 20), ("__1_0.distcp", 10)]
    assert storage.list_step("global_step2") == []


def test_a_buffer_written_object_reads_back_whole(storage: ObjectStorage) -> None:
    checks.buffer_file_round_trip(storage, 2 * PART_MIB * MIB + 17)
