"""Which object stores this user's credentials may be sent to: only ones the user named, never one a study
directory names.

A study directory is data from anyone (copied from a colleague, unpacked from an archive): its sweep copy,
ledger, task.json files and results may name any endpoint and bucket. Sending a request there signs it with
this user's access key, so a store is contacted only when the current user supplied it:

- a store (endpoint and bucket) of the sweep file given to this command (`plan SWEEP`, `sweep submit SWEEP`);
- any bucket at an endpoint the environment names: `STUDYCTL_S3_ENDPOINT` (what the project's server's env file
  exports) and `STUDYCTL_S3_TRUSTED` (endpoint URLs, or `s3://BUCKET` for a bucket at the SDK's own endpoint,
  separated by spaces or commas).

Anything else (a status, resubmit or cancel of a study whose sweep names another store) is refused in one line
before any request: its objects are left, and the clean-up marker stays for a command that may contact it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from studyctl.objstore.target import S3Target, masked

ENDPOINT_ENV = "STUDYCTL_S3_ENDPOINT"
TRUSTED_ENV = "STUDYCTL_S3_TRUSTED"

# stores of the sweep file this command was given: (endpoint, bucket), endpoint None for the SDK's own
_given: set[tuple[str | None, str]] = set()


def _endpoint(url: str | None) -> str | None:
    return url.rstrip("/") if url else None


def given(targets: Iterable[S3Target]) -> None:
    """The stores of the sweep file the user gave this command: trusted for the rest of it."""
    _given.update((_endpoint(t.endpoint), t.bucket) for t in targets)


def _from_environment() -> tuple[set[str], set[str]]:
    """(endpoints, buckets at the SDK's own endpoint) the environment names."""
    endpoints, buckets = set(), set()
    words = [os.environ.get(ENDPOINT_ENV, ""), *re.split(r"[\s,]+", os.environ.get(TRUSTED_ENV, ""))]
    for word in filter(None, (w.strip() for w in words)):
        if word.startswith("s3://"):
            buckets.add(word[len("s3://"):].split("/", 1)[0])
        else:
            endpoints.add(word.rstrip("/"))
    return endpoints, buckets


def refusal(target: S3Target) -> str | None:
    """Why `target` may not be sent this user's credentials (one line), or None when the user supplied it."""
    endpoint = _endpoint(target.endpoint)
    if (endpoint, target.bucket) in _given:
        return None
    endpoints, buckets = _from_environment()
    if endpoint in endpoints if endpoint is not None else target.bucket in buckets:
        return None
    if endpoint is not None:
        store, entry = f"endpoint {masked(endpoint)}", masked(endpoint)
    else:
        store, entry = f"bucket {target.bucket} at the SDK's own endpoint", f"s3://{target.bucket}"
    return (f"{target.describe()}: not contacted: the {store} comes from the study directory, not from you "
            f"(submit the sweep again, or set {TRUSTED_ENV}={entry} to trust it)")
