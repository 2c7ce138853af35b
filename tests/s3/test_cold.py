"""Cold reads: no client cache exists, and the project's server's page cache is evicted on request and said so;
any other endpoint's cache is left alone and that is said too."""

from __future__ import annotations

import os
import subprocess

import pytest

from studyctl.objstore.cache import drop_server_cache
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target
from tests.s3.server import BUCKET, Server

pytestmark = pytest.mark.s3
MIB = 1 << 20


def resident_bytes(server: Server) -> int:
    """Page-cache bytes of the server's volume files (util-linux fincore)."""
    files = [str(p) for p in (server.directory / "data").rglob("*.dat")]
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *files], capture_output=True,
                         text=True, check=True).stdout
    return sum(int(n) for n in out.split())


def test_the_local_servers_page_cache_is_evicted_and_said(s3_private_server: Server) -> None:
    target = S3Target(BUCKET, "cold", s3_private_server.endpoint)
    data = os.urandom(48 * MIB)
    with ObjectClient(target, 2, 16 * MIB) as client:
        client.put(target.key("f"), memoryview(data), RequestCounts())
        into = memoryview(bytearray(len(data)))
        client.get(target.key("f"), into, 0, RequestCounts())  # warm
        warm = resident_bytes(s3_private_server)
        said = drop_server_cache(target, s3_private_server.directory)
        cold = resident_bytes(s3_private_server)
        client.get(target.key("f"), into, 0, RequestCounts())
    assert into == data
    assert warm >= len(data) // 2 and cold <= len(data) // 8, (warm, cold)
    assert "seaweedfs local" in said and "evicted" in said and "\n" not in said


def test_another_endpoints_cache_is_left_alone_and_said(s3_server: Server) -> None:
    said = drop_server_cache(S3Target(BUCKET, "x", "https://s3.example.org"))
    assert "not the project's local server" in said and "s3://studyctl/x at https://s3.example.org" in said
