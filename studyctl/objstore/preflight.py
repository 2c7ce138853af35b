"""Before any rank starts: can this target be written? A HEAD of the bucket and a tiny PUT/DELETE under its
prefix, with short deadlines. A throttled answer is retried as the worker retries it (a store that slows
requests down is not refused for it); an unreachable endpoint is not, so a dead endpoint answers in seconds."""

from __future__ import annotations

import uuid

from studyctl.objstore.calls import PREFLIGHT, CountedCalls, RetryPolicy
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import ObjectStoreError
from studyctl.objstore.target import S3Target


def target_problem(target: S3Target, policy: RetryPolicy = PREFLIGHT) -> str | None:
    """One line naming the target and the cause (unreachable, bad credentials, no such bucket, access
    denied, throttled: with the attempts made and over how long), or None when an object can be written and
    deleted under the prefix."""
    try:
        calls = CountedCalls(target, 1, policy)
        counts = RequestCounts()
        _head_bucket(calls, counts)
        key = target.key(f".studyctl-probe-{uuid.uuid4().hex}")
        calls.call(counts, "put", "put_object", f"PUT {key}", Bucket=target.bucket, Key=key, Body=b"probe")
        calls.call(counts, "delete", "delete_object", f"DELETE {key}", Bucket=target.bucket, Key=key)
    except ObjectStoreError as error:
        return error.reason
    except ValueError as error:  # botocore's own refusals of a malformed endpoint or region
        return f"{target.describe()}: {error}"
    return None


def _head_bucket(calls: CountedCalls, counts: RequestCounts) -> None:
    """HEAD of the bucket; its 403 has no body to tell bad credentials from a denial, so a one-key LIST,
    whose answer names the cause, follows it."""
    bucket = calls.target.bucket
    try:
        calls.call(counts, "head", "head_bucket", "HEAD bucket", Bucket=bucket)
    except ObjectStoreError as error:
        if error.code != "403":
            raise
        calls.call(counts, "list", "list_objects_v2", "LIST", Bucket=bucket, Prefix=calls.target.prefix, MaxKeys=1)
        raise
