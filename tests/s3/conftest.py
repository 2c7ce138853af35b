"""`s3_server`: the project's SeaweedFS, started when it is down (CI starts from a clean clone), with its
credentials in the environment for the session: the standard chain is the only way the client gets them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.s3.server import Server, ensure_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Server]:
    server = ensure_server()
    before = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    yield server  # left running: other sessions may share it; scripts/test.sh stops what it started
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
