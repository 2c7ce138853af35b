"""One boto3 S3 client per target with every request counted: by kind, its retries, throttled answers.

botocore retries a failed attempt itself ("standard" mode); each attempt's HTTP answer passes the
`needs-retry` event, where a 503/429 is counted as throttled, and a request's retries are read from its
final answer's RetryAttempts. Which RequestCounts an attempt belongs to is kept per thread.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3
from botocore.config import Config

from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import failure
from studyctl.objstore.target import S3Target

# attempts per request (standard mode: exponential backoff with jitter, throttling and 5xx retried)
MAX_ATTEMPTS = 5
TIMEOUT_S = 60.0


def boto_client(target: S3Target, pool: int, attempts: int = MAX_ATTEMPTS, timeout_s: float = TIMEOUT_S) -> Any:
    """A botocore S3 client for `target` (credentials: the standard chain). No checksum of the payload is
    computed, for the signature (UNSIGNED-PAYLOAD, as botocore sends over HTTPS) or as a CRC header: SHA-256
    over every byte costs ~0.7 s of a core per GiB here, CPU the ranks' throughput is measured on; TLS (or
    TCP on a local endpoint) carries the bytes' integrity, and the data is synthetic."""
    config = Config(
        region_name=target.region,
        s3={"addressing_style": target.addressing, "payload_signing_enabled": False},
        max_pool_connections=max(pool, 1) + 2,
        retries={"mode": "standard", "total_max_attempts": attempts},
        connect_timeout=min(timeout_s, 10.0),
        read_timeout=timeout_s,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client("s3", endpoint_url=target.endpoint, config=config)


class CountedCalls:
    """Calls S3 operations on one client, counting each in the RequestCounts the caller passes (thread-safe)."""

    def __init__(self, target: S3Target, pool: int, attempts: int = MAX_ATTEMPTS, timeout_s: float = TIMEOUT_S) -> None:
        self.target = target
        self.client = boto_client(target, pool, attempts, timeout_s)
        self._lock = threading.Lock()
        self._current = threading.local()
        self.client.meta.events.register("needs-retry.s3", self._on_attempt)

    def _on_attempt(self, response: Any = None, **_: Any) -> None:
        counts: RequestCounts | None = getattr(self._current, "counts", None)
        if counts is None or not response:
            return
        status = response[0].status_code
        code = (response[1] or {}).get("Error", {}).get("Code", "")
        if status in (429, 503) or code == "SlowDown":
            with self._lock:
                counts.throttled += 1

    def bump(self, counts: RequestCounts, kind: str, n: int = 1, retries: int = 0) -> None:
        with self._lock:
            setattr(counts, kind, getattr(counts, kind) + n)
            counts.retries += retries

    def call(self, counts: RequestCounts, kind: str, operation: str, what: str = "", **params: Any) -> Any:
        """`client.<operation>(**params)`, counted as one `kind` request; any failure → ObjectStoreError."""
        self._current.counts = counts
        try:
            answer = getattr(self.client, operation)(**params)
        except Exception as error:
            meta = getattr(error, "response", None) or {}
            self.bump(counts, kind, retries=meta.get("ResponseMetadata", {}).get("RetryAttempts", 0))
            raise failure(self.target, error, what or operation) from error
        finally:
            self._current.counts = None
        self.bump(counts, kind, retries=answer.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        return answer
