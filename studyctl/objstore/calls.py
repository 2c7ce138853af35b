"""One boto3 S3 client per target with every request counted: by kind, its retries, throttled answers.

botocore retries a failed attempt itself ("standard" mode: exponential backoff with jitter); each attempt's
answer passes the `needs-retry` event, where a 503/429 is counted as throttled, and where a `RetryPolicy` stops
the retries early: past its total time, or (`transient` off) on anything but a throttled answer. Which
RequestCounts an attempt belongs to is kept per thread, with the attempts and the time a request has taken.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import failure
from studyctl.objstore.target import S3Target


@dataclass(frozen=True)
class RetryPolicy:
    """How long one logical request may take: every attempt has a connect and a read deadline, no attempt starts
    after `total_s` from the first, and at most `attempts` are made. `transient`: retry an unreachable endpoint,
    a timeout or a 5xx too (else only throttled answers, 503/429/SlowDown, are retried)."""

    attempts: int = 5
    connect_s: float = 10.0
    read_s: float = 60.0
    total_s: float = 300.0
    transient: bool = True

    def bound_s(self) -> float:
        """The longest one request can take: `total_s`, then one more backoff (botocore's cap, 20 s) and the
        last attempt's deadlines."""
        return self.total_s + 20.0 + self.connect_s + self.read_s


# The worker's requests (ranks under load: a minute per read, five attempts), the one retry policy of the project.
WORKER = RetryPolicy()
# Before a study starts: throttled answers retried as the worker retries them, a dead endpoint answered in seconds.
PREFLIGHT = RetryPolicy(connect_s=5.0, read_s=5.0, total_s=30.0, transient=False)
# A command removing what an ended attempt left: a store that does not answer is left for a later command.
CLEANUP = RetryPolicy(attempts=3, connect_s=3.0, read_s=5.0, total_s=10.0)
MAX_ATTEMPTS = WORKER.attempts
TIMEOUT_S = WORKER.read_s
THROTTLED_STATUS = (429, 503)


def boto_client(target: S3Target, pool: int, policy: RetryPolicy = WORKER) -> Any:
    """A botocore S3 client for `target` (credentials: the standard chain). No checksum of the payload is
    computed, for the signature (UNSIGNED-PAYLOAD, as botocore sends over HTTPS) or as a CRC header: SHA-256
    over every byte costs ~0.7 s of a core per GiB here, CPU the ranks' throughput is measured on; TLS (or
    TCP on a local endpoint) carries the bytes' integrity, and the data is synthetic."""
    config = Config(
        region_name=target.region,
        s3={"addressing_style": target.addressing, "payload_signing_enabled": False},
        max_pool_connections=max(pool, 1) + 2,
        retries={"mode": "standard", "total_max_attempts": policy.attempts},
        connect_timeout=policy.connect_s,
        read_timeout=policy.read_s,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client("s3", endpoint_url=target.endpoint, config=config)


def worker_policy(attempts: int = MAX_ATTEMPTS, timeout_s: float = TIMEOUT_S) -> RetryPolicy:
    """The worker's policy with its attempts and read deadline as a task sets them (connect: at most 10 s)."""
    return RetryPolicy(attempts, min(timeout_s, WORKER.connect_s), timeout_s, WORKER.total_s)


def _throttled(response: Any) -> bool:
    if not response:
        return False
    code = (response[1] or {}).get("Error", {}).get("Code", "")
    return response[0].status_code in THROTTLED_STATUS or code == "SlowDown"


class CountedCalls:
    """Calls S3 operations on one client, counting each in the RequestCounts the caller passes (thread-safe)."""

    def __init__(self, target: S3Target, pool: int, policy: RetryPolicy = WORKER) -> None:
        self.target = target
        self.policy = policy
        self.client = boto_client(target, pool, policy)
        self._lock = threading.Lock()
        self._current = threading.local()
        self.client.meta.events.register_first("needs-retry.s3", self._stop_early)
        self.client.meta.events.register("needs-retry.s3", self._on_attempt)

    def _stop_early(self, response: Any = None, caught_exception: Any = None, attempts: int = 1,
                    **_: Any) -> bool | None:
        """False (no retry, whatever botocore's own policy says) past the total time, or on a failure the policy
        does not retry; None leaves the choice to botocore."""
        self._current.attempts = attempts
        started = getattr(self._current, "started", None)
        failed = caught_exception is not None or (response and response[0].status_code >= 400)
        if not failed:
            return None
        if started is not None and time.monotonic() - started >= self.policy.total_s:
            return False
        return None if self.policy.transient or _throttled(response) else False

    def _on_attempt(self, response: Any = None, **_: Any) -> None:
        counts: RequestCounts | None = getattr(self._current, "counts", None)
        if counts is not None and _throttled(response):
            with self._lock:
                counts.throttled += 1

    def bump(self, counts: RequestCounts, kind: str, n: int = 1, retries: int = 0) -> None:
        with self._lock:
            setattr(counts, kind, getattr(counts, kind) + n)
            counts.retries += retries

    def call(self, counts: RequestCounts, kind: str, operation: str, what: str = "", **params: Any) -> Any:
        """`client.<operation>(**params)`, counted as one `kind` request; any failure → ObjectStoreError that says
        how many attempts were made over how long."""
        self._current.counts, self._current.started, self._current.attempts = counts, time.monotonic(), 1
        try:
            answer = getattr(self.client, operation)(**params)
        except Exception as error:
            tried = (self._current.attempts, time.monotonic() - self._current.started)
            self.bump(counts, kind, retries=tried[0] - 1)
            raise failure(self.target, error, what or operation, tried) from error
        finally:
            self._current.counts = None
        self.bump(counts, kind, retries=answer.get("ResponseMetadata", {}).get("RetryAttempts", 0))
        return answer
