"""The retry policy every S3 request runs under, against an endpoint that answers 503 to everything (a fake at
the network boundary: botocore's real client, retries and signing), and the trust rule's sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.objstore import trust
from studyctl.objstore.calls import RetryPolicy
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import ObjectStoreError
from studyctl.objstore.target import S3Target
from tests.recording_endpoint import recording_endpoint

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    for name in (trust.ENDPOINT_ENV, trust.TRUSTED_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(trust, "_given", set())


def head(target: S3Target, policy: RetryPolicy) -> str:
    with ObjectClient(target, 1, 5 << 20, policy=policy) as client, pytest.raises(ObjectStoreError) as caught:
        client.calls.call(RequestCounts(), "head", "head_bucket", "HEAD bucket", Bucket=target.bucket)
    return caught.value.reason


def test_an_answer_the_store_refuses_is_retried_to_the_policys_attempts_and_said() -> None:
    with recording_endpoint() as (endpoint, seen):
        reason = head(S3Target("b", endpoint=endpoint), RetryPolicy(attempts=3, read_s=2, total_s=60, transient=False))
    assert len(seen) == 3 and "3 attempts over" in reason and "\n" not in reason


def test_no_attempt_starts_after_the_policys_total_time() -> None:
    with recording_endpoint() as (endpoint, seen):
        reason = head(S3Target("b", endpoint=endpoint), RetryPolicy(attempts=5, read_s=2, total_s=0))
    assert len(seen) == 1 and "1 attempt over" in reason


def test_an_unreachable_endpoint_is_retried_only_where_the_policy_says() -> None:
    target = S3Target("b", endpoint="http://127.0.0.1:9")  # nothing listens there
    assert "1 attempt over" in head(target, RetryPolicy(attempts=3, connect_s=1, transient=False))
    assert "3 attempts over" in head(target, RetryPolicy(attempts=3, connect_s=1, transient=True))


def test_only_stores_the_user_supplied_are_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    mine, theirs = S3Target("b", endpoint="http://10.0.0.1:9000/"), S3Target("b", endpoint="http://10.0.0.2:9000")
    assert trust.refusal(mine) and trust.refusal(theirs) and trust.refusal(S3Target("bucket"))
    monkeypatch.setenv(trust.ENDPOINT_ENV, "http://10.0.0.1:9000")
    assert trust.refusal(mine) is None and trust.refusal(theirs)
    monkeypatch.setenv(trust.TRUSTED_ENV, "s3://bucket, http://10.0.0.3:1")
    assert trust.refusal(S3Target("bucket")) is None and trust.refusal(S3Target("other"))
    assert trust.refusal(S3Target("any", endpoint="http://10.0.0.3:1")) is None
    trust.given([S3Target("given", endpoint="http://10.0.0.4:1")])
    assert trust.refusal(S3Target("given", endpoint="http://10.0.0.4:1")) is None
    assert trust.refusal(S3Target("other", endpoint="http://10.0.0.4:1")), "a given store is its bucket only"


def test_every_study_layer_module_that_reaches_a_store_asks_the_trust_rule_first() -> None:
    """Where the study layer (anything outside the S3 client package and the worker) builds a client or runs the
    preflight, it calls `trust.refusal` in the same module: found by reading the source, so a new caller
    cannot be left out."""
    reaching = ("ObjectClient(", "CountedCalls(", "boto_client(", "target_problem(")
    callers = [p for p in (REPO / "studyctl").rglob("*.py") if "objstore" not in p.parts
               and any(r in p.read_text() for r in reaching)]
    assert callers, "the study layer reaches a store somewhere"
    assert [p for p in callers if "trust.refusal(" not in p.read_text()] == []
