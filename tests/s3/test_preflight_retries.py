"""The check before a study retries throttled answers as the worker does (one policy): a store throttling one
request in two is not refused, and one that throttles everything is refused saying what was tried."""

from __future__ import annotations

import re
import uuid

import pytest

from studyctl.objstore.calls import PREFLIGHT, WORKER
from studyctl.objstore.preflight import target_problem
from studyctl.objstore.target import S3Target
from tests.s3.server import BUCKET, Server
from tests.s3.throttle import throttling_proxy

pytestmark = pytest.mark.s3


def test_a_store_throttling_one_request_in_two_passes_the_check(s3_server: Server) -> None:
    with throttling_proxy(s3_server.endpoint, 0, every=2) as endpoint:
        assert target_problem(S3Target(BUCKET, f"tests/{uuid.uuid4().hex[:10]}", endpoint)) is None


@pytest.mark.parametrize("status", [503, 429])
def test_a_store_that_always_throttles_is_refused_saying_what_was_tried(s3_server: Server, status: int) -> None:
    with throttling_proxy(s3_server.endpoint, 0, status=status, every=1) as endpoint:
        target = S3Target(BUCKET, "tests/throttled", endpoint)
        problem = target_problem(target)
    assert problem is not None and problem.startswith(target.describe()) and "\n" not in problem
    tried = re.search(r"throttled \((\w+)\), (\d+) attempts over ([\d.]+) s", problem)
    assert tried, problem
    assert int(tried.group(2)) == WORKER.attempts == PREFLIGHT.attempts  # the worker's retries, not one try
    assert float(tried.group(3)) <= PREFLIGHT.bound_s()
