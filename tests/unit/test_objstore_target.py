"""S3 URLs and keys: the prefix joins the relative path with one slash, never doubled or dropped (the read paths
of other tools that lost or doubled the bucket prefix made read throughput unmeasurable)."""

from __future__ import annotations

import pytest

from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target


@pytest.mark.parametrize(("url", "relative", "key"), [
    ("s3://b/ckpt", "s.k/p/step-1/model.pt", "ckpt/s.k/p/step-1/model.pt"),
    ("s3://b/ckpt/", "/s.k//p/model.pt", "ckpt/s.k/p/model.pt"),
    ("s3://b//deep/er/", "x", "deep/er/x"),
    ("s3://b", "x/y", "x/y"),
    ("s3://b/ckpt", "", "ckpt"),
])
def test_keys_join_prefix_and_path_with_one_slash(url: str, relative: str, key: str) -> None:
    target = S3Target.from_url(url, endpoint="http://127.0.0.1:8333")
    assert target.key(relative) == key
    assert target.below("s.k").key("f") == target.key("s.k/f")


@pytest.mark.parametrize("url", ["http://b/x", "s3:///x", "s3://b/x?versionId=1", "b/x", "s3://b/x#frag"])
def test_a_url_that_is_not_s3_bucket_prefix_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="s3://BUCKET"):
        S3Target.from_url(url)


def test_addressing_is_path_or_virtual() -> None:
    with pytest.raises(ValueError, match="path, virtual"):
        S3Target("b", addressing="dns")


def test_describe_names_bucket_prefix_and_endpoint() -> None:
    assert S3Target("b", "p/q", "http://h:1").describe() == "s3://b/p/q at http://h:1"
    assert "AWS (eu-west-1)" in S3Target("b", region="eu-west-1").describe()


def test_counts_add_kind_by_kind_and_keep_the_first_byte_of_the_phase() -> None:
    phase = RequestCounts(put=2, part=3, first_byte_s=None)
    phase.add(RequestCounts(get=3, retries=1, throttled=1, first_byte_s=0.5))
    phase.add(RequestCounts(get=1, first_byte_s=0.1))
    assert (phase.put, phase.part, phase.get, phase.retries, phase.throttled) == (2, 3, 4, 1, 1)
    assert phase.first_byte_s == 0.5
    assert phase.requests() == 9
