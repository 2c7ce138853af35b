"""What goes wrong, said in one line naming the target and the cause; no secret in any output; an upload cut
off (an error, the server stopping, a SIGKILL of the writer) leaves nothing behind once cleaned up."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from studyctl.objstore.calls import boto_client
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import ObjectStoreError
from studyctl.objstore.preflight import target_problem
from studyctl.objstore.target import S3Target
from tests.s3.server import BUCKET, REPO, Server

pytestmark = pytest.mark.s3
MIB = 1 << 20


@pytest.fixture
def target(s3_server: Server) -> S3Target:
    return S3Target(BUCKET, f"tests/{uuid.uuid4().hex[:10]}", s3_server.endpoint)


def one_line(reason: str | None, target: S3Target, cause: str) -> str:
    assert reason is not None
    assert "\n" not in reason and reason.startswith(target.describe()) and cause in reason, reason
    return reason


def test_a_writable_target_has_no_problem_and_leaves_no_probe(target: S3Target) -> None:
    assert target_problem(target) is None
    listed = boto_client(target, 1).list_objects_v2(Bucket=BUCKET, Prefix=target.prefix)
    assert listed.get("KeyCount", 0) == 0


@pytest.mark.parametrize(("variable", "code"), [("AWS_SECRET_ACCESS_KEY", "SignatureDoesNotMatch"),
                                                ("AWS_ACCESS_KEY_ID", "InvalidAccessKeyId")])
def test_bad_credentials_are_one_line_without_the_secret(target: S3Target, s3_server: Server,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capfd: pytest.CaptureFixture[str],
                                                         caplog: pytest.LogCaptureFixture, variable: str,
                                                         code: str) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(variable, "STUDYCTLWRONG0000000")
    reason = one_line(target_problem(target), target, f"bad credentials ({code})")
    with ObjectClient(target, 2, 5 * MIB) as client, pytest.raises(ObjectStoreError) as caught:
        client.put(target.key("f"), memoryview(bytes(6 * MIB)), RequestCounts())
    one_line(caught.value.reason, target, "bad credentials")
    out, err = capfd.readouterr()
    for text in (reason, caught.value.reason, out, err, caplog.text):
        assert s3_server.secret not in text


def test_no_credentials_at_all_is_one_line(target: S3Target, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata service to ask here
    one_line(target_problem(target), target, "no credentials")


def test_a_write_the_identity_may_not_make_is_access_denied(target: S3Target, s3_server: Server,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    reader = next(i for i in json.loads((s3_server.directory / "identity.json").read_text())["identities"]
                  if i["name"] == "studyctl-reader")["credentials"][0]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", reader["accessKey"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", reader["secretKey"])
    one_line(target_problem(target), target, "access denied")


def test_a_missing_bucket_is_one_line(s3_server: Server) -> None:
    target = S3Target(f"no-such-bucket-{uuid.uuid4().hex[:8]}", "x", s3_server.endpoint)
    one_line(target_problem(target), target, "no such bucket")


def test_an_unreachable_endpoint_is_one_line_within_seconds(s3_server: Server) -> None:
    with __import__("socket").socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        target = S3Target(BUCKET, "x", f"http://127.0.0.1:{s.getsockname()[1]}")
        t0 = time.monotonic()
        one_line(target_problem(target), target, "endpoint unreachable")
    assert time.monotonic() - t0 < 15  # no retry loop on a dead endpoint (the probe's timeout is 5 s)


def test_a_server_stopped_mid_upload_is_an_object_store_error(s3_private_server: Server) -> None:
    target = S3Target(BUCKET, "cut", s3_private_server.endpoint)
    client = ObjectClient(target, 2, 5 * MIB, attempts=2, timeout_s=5)
    failed: list[BaseException] = []

    def upload() -> None:
        try:
            client.put(target.key("big"), memoryview(bytes(400 * MIB)), RequestCounts())
        except BaseException as error:
            failed.append(error)

    writer = threading.Thread(target=upload)
    writer.start()
    wait_for_upload(target)
    s3_private_server.stop()
    writer.join(120)
    assert not writer.is_alive()
    assert failed and isinstance(failed[0], ObjectStoreError), failed
    one_line(failed[0].reason, target, "")
    client.close()


def wait_for_upload(target: S3Target, limit_s: float = 60) -> None:
    """Until an incomplete multipart upload with at least one part exists under the target's prefix."""
    s3, end = boto_client(target, 1), time.monotonic() + limit_s
    while time.monotonic() < end:
        for upload in s3.list_multipart_uploads(Bucket=BUCKET, Prefix=target.prefix + "/").get("Uploads", []):
            if s3.list_parts(Bucket=BUCKET, Key=upload["Key"], UploadId=upload["UploadId"]).get("Parts"):
                return
        time.sleep(0.1)
    raise AssertionError("no multipart upload appeared")


WRITER = """
import sys
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target
target = S3Target("{bucket}", "{prefix}", "{endpoint}")
ObjectClient(target, 1, 5 << 20).put(target.key("step-1/model.pt"), memoryview(bytes(300 << 20)), RequestCounts())
"""


def signalled_mid_upload(code: str, target: S3Target, signum: int) -> int:
    """Runs `code` (a writer) in a new process, sends it `signum` once its upload has a part; its exit code."""
    code = code.format(bucket=BUCKET, prefix=target.prefix, endpoint=target.endpoint)
    writer = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=os.environ.copy())
    try:
        wait_for_upload(target)
    finally:
        writer.send_signal(signum)
    return writer.wait(60)


def left_behind(target: S3Target) -> tuple[int, int]:
    """(objects, incomplete multipart uploads) under the target's prefix."""
    s3, below = boto_client(target, 1), target.prefix + "/"
    return (s3.list_objects_v2(Bucket=BUCKET, Prefix=below).get("KeyCount", 0),
            len(s3.list_multipart_uploads(Bucket=BUCKET, Prefix=below).get("Uploads", [])))


def test_a_writer_killed_mid_upload_leaves_nothing_once_uploads_are_aborted(target: S3Target) -> None:
    assert signalled_mid_upload(WRITER, target, signal.SIGKILL) == -signal.SIGKILL
    assert left_behind(target) == (0, 1)
    with ObjectClient(target, 1, 5 * MIB) as client:
        assert client.abort_uploads(target.prefix) == 1
        assert client.abort_uploads(target.prefix) == 0
    assert left_behind(target) == (0, 0)


def test_an_upload_that_fails_is_aborted_before_the_error_goes_on(target: S3Target) -> None:
    """A part refused mid-upload (here: a part size S3 refuses for any part but the last) aborts the upload."""
    client = ObjectClient(target, 2, 5 * MIB)
    client.part_bytes = 1 * MIB  # below S3's 5 MiB minimum: the server refuses completing it
    with pytest.raises(ObjectStoreError):
        client.put(target.key("f"), memoryview(bytes(3 * MIB)), RequestCounts())
    assert left_behind(target) == (0, 0)
    client.close()


def test_ctrl_c_mid_upload_aborts_it(target: S3Target) -> None:
    """KeyboardInterrupt while parts are in flight (here raised where the third part's bytes are asked for)."""

    def chunk(offset: int, length: int) -> memoryview:
        if offset >= 10 * MIB:
            raise KeyboardInterrupt
        return memoryview(bytes(length))

    with ObjectClient(target, 2, 5 * MIB) as client, pytest.raises(KeyboardInterrupt):
        client.put_from(target.key("f"), 30 * MIB, chunk, RequestCounts())
    assert left_behind(target) == (0, 0)


TERMINATED = """
import os, signal
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target
target = S3Target("{bucket}", "{prefix}", "{endpoint}")
client = ObjectClient(target, 1, 5 << 20)
def on_term(signum, frame):  # what a rank's SIGTERM handler does before os._exit
    client.abort_in_flight()
    os._exit(128 + signum)
signal.signal(signal.SIGTERM, on_term)
client.put(target.key("step-1/model.pt"), memoryview(bytes(300 << 20)), RequestCounts())
"""


def test_a_sigterm_handler_aborts_the_uploads_in_flight(target: S3Target) -> None:
    assert signalled_mid_upload(TERMINATED, target, signal.SIGTERM) == 128 + signal.SIGTERM
    assert left_behind(target) == (0, 0)
