"""Objects in and out of the real server: bytes equal, ranged reads, and every request counted as documented
(RequestCounts: a multipart object is put=2 — initiate and complete — plus one part per part size)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target
from tests.s3.server import BUCKET, Server

pytestmark = pytest.mark.s3
MIB = 1 << 20
PART = 16 * MIB


@pytest.fixture
def target(s3_server: Server) -> Iterator[S3Target]:
    target = S3Target(BUCKET, f"tests/{uuid.uuid4().hex[:10]}", s3_server.endpoint)
    yield target
    with ObjectClient(target, 1, PART) as client:
        client.delete_prefix(target.prefix)


@pytest.fixture
def client(target: S3Target) -> Iterator[ObjectClient]:
    with ObjectClient(target, 4, PART) as client:
        yield client


@pytest.mark.parametrize(("size", "puts", "parts", "gets"), [
    (1, 1, 0, 1),
    (PART, 1, 0, 1),                # at the part size: one PUT
    (PART + 1, 2, 2, 2),            # just above: initiate, 2 parts, complete
    (40 * MIB, 2, 3, 3),            # 16 + 16 + 8
])
def test_round_trip_is_byte_equal_and_counted(client: ObjectClient, target: S3Target, size: int, puts: int,
                                              parts: int, gets: int) -> None:
    data = memoryview(bytearray(os.urandom(size)))
    wrote, read = RequestCounts(), RequestCounts()
    client.put(target.key("step-1/model.pt"), data, wrote)
    into = memoryview(bytearray(size))
    assert client.get(target.key("step-1/model.pt"), into, 0, read) == size
    assert into == data
    assert (wrote.put, wrote.part, wrote.get, wrote.retries, wrote.throttled) == (puts, parts, 0, 0, 0)
    assert (read.get, read.put, read.part) == (gets, 0, 0)
    assert read.first_byte_s is not None and read.first_byte_s > 0
    assert wrote.first_byte_s is None


@pytest.mark.parametrize(("offset", "length"), [(0, 100), (PART - 10, 20), (5 * MIB + 3, 30 * MIB), (40 * MIB - 1, 1)])
def test_ranged_reads_return_exactly_the_range(client: ObjectClient, target: S3Target, offset: int,
                                               length: int) -> None:
    data = os.urandom(40 * MIB)
    client.put(target.key("f"), memoryview(data), RequestCounts())
    into = memoryview(bytearray(length))
    counts = RequestCounts()
    assert client.get(target.key("f"), into, offset, counts) == length
    assert bytes(into) == data[offset:offset + length]
    assert counts.get == -(-length // PART)


def test_a_range_past_the_end_is_an_error_naming_the_target(client: ObjectClient, target: S3Target) -> None:
    from studyctl.objstore.errors import ObjectStoreError

    client.put(target.key("small"), memoryview(b"x" * 100), RequestCounts())
    with pytest.raises(ObjectStoreError) as caught:
        client.get(target.key("small"), memoryview(bytearray(200)), 0, RequestCounts())
    assert caught.value.reason.startswith(target.describe()) and "\n" not in caught.value.reason


def test_delete_prefix_removes_everything_below_it_and_nothing_beside_it(client: ObjectClient,
                                                                         target: S3Target) -> None:
    for i in range(5):
        client.put(target.key(f"run1/step-{i}/f"), memoryview(b"x"), RequestCounts())
    client.put(target.key("run10/f"), memoryview(b"y"), RequestCounts())
    counts = RequestCounts()
    assert client.delete_prefix(target.key("run1"), counts) == 5
    assert (counts.list, counts.delete) == (1, 1)  # one page, one batch
    assert client.delete_prefix(target.key("run1")) == 0
    assert client.delete_prefix(target.key("run10")) == 1


def test_put_from_streams_an_object_larger_than_its_buffer(client: ObjectClient, target: S3Target) -> None:
    """The worker's shape: one 16 MiB buffer, its views repeated for a 40 MiB object (parts asked for by offset)."""
    buffer = memoryview(os.urandom(PART))
    asked: list[tuple[int, int]] = []

    def chunk(offset: int, length: int) -> memoryview:
        asked.append((offset, length))
        return buffer[offset % PART:offset % PART + length]

    counts = RequestCounts()
    client.put_from(target.key("big"), 40 * MIB, chunk, counts)
    assert sorted(asked) == [(0, PART), (PART, PART), (2 * PART, 8 * MIB)]
    assert (counts.put, counts.part) == (2, 3)
    into = memoryview(bytearray(40 * MIB))
    client.get(target.key("big"), into, 0, RequestCounts())
    assert into == bytes(buffer) * 2 + bytes(buffer[:8 * MIB])


def test_an_empty_object_is_one_put_and_reads_as_nothing(client: ObjectClient, target: S3Target) -> None:
    counts = RequestCounts()
    client.put(target.key("empty"), memoryview(b""), counts)
    assert (counts.put, counts.part) == (1, 0)
    assert client.get(target.key("empty"), memoryview(bytearray(0)), 0, counts) == 0


@pytest.mark.parametrize("status", [503, 429])
def test_throttled_answers_are_retried_and_counted(s3_server: Server, target: S3Target, status: int) -> None:
    """Two part uploads answered 503 SlowDown / 429 (a fault injector in front of the server): each is retried
    and counted as one throttled answer and one retry; the parts and the bytes are as without them."""
    from tests.s3.throttle import throttling_proxy

    data = os.urandom(40 * MIB)
    with throttling_proxy(s3_server.endpoint, refuse=2, status=status) as endpoint:
        via = S3Target(target.bucket, target.prefix, endpoint)
        counts = RequestCounts()
        with ObjectClient(via, 4, PART) as client:
            client.put(via.key("f"), memoryview(data), counts)
    assert (counts.put, counts.part, counts.throttled, counts.retries) == (2, 3, 2, 2)
    into = memoryview(bytearray(len(data)))
    with ObjectClient(target, 4, PART) as client:
        client.get(target.key("f"), into, 0, RequestCounts())
    assert into == data


def test_get_into_reads_through_places_it_is_given(client: ObjectClient, target: S3Target) -> None:
    """The worker's shape: a range larger than its buffer, each part into the place it names (here: kept)."""
    data = os.urandom(40 * MIB)
    client.put(target.key("f"), memoryview(data), RequestCounts())
    places: dict[int, memoryview] = {}

    def into(start: int, length: int) -> memoryview:
        places[start] = memoryview(bytearray(length))
        return places[start]

    counts = RequestCounts()
    assert client.get_into(target.key("f"), 39 * MIB, into, MIB, counts) == 39 * MIB
    assert sorted(places) == [0, PART, 2 * PART] and counts.get == 3
    assert b"".join(bytes(places[s]) for s in sorted(places)) == data[MIB:]
