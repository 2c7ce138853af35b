"""A store that stops answering (its server SIGSTOPped: connections accepted, nothing answered) costs a command
seconds, not minutes: status and submit return within the clean-up policy's bound, the clean-up stays marked,
SIGTERM still ends a command at once, and once the store answers again the next command finishes the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from studyctl.attempt.data import derive_places
from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Update
from studyctl.definition.checkpoint.objects import place_target
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.objstore.calls import CLEANUP
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.target import S3Target
from studyctl.states import FailureClass, State
from studyctl.study.ledger import Ledger
from studyctl.study.store import sync_points
from tests.s3.server import BUCKET, Server

pytestmark = pytest.mark.s3
MIB = 1 << 20
START_S = 30.0  # an interpreter starting and importing on a loaded machine, on top of the policy's own bound
SWEEP = """\
study: {name}
models: [gpt2-125m]
matrix: {{zero_stage: 1, nodes: 1, ranks_per_node: 1}}
filesystems:
  s3: {{path: "s3://{bucket}/{prefix}", kind: s3, endpoint: "{endpoint}"}}
checkpoint: {{scale: {scale}, writes: {writes}, reads: 1, buffer_mib: 16, block_mib: 4, part_mib: 5,
             s3_concurrency: 2}}
ceilings: off
calibration: off
local: {{timeout_s: {timeout_s}}}
estimate: {{overhead_s: 0, GiBps_per_node: 1000}}  # a short limit is not refused up front
"""


def sweep_text(tmp_path: Path, server: Server, name: str, scale: float = 0.001, writes: int = 1,
               timeout_s: int = 300) -> str:
    return SWEEP.format(name=name, bucket=BUCKET, prefix=tmp_path.name, endpoint=server.endpoint, scale=scale,
                        writes=writes, timeout_s=timeout_s)


def left_behind(server: Server, prefix: str) -> tuple[list[str], list[str]]:
    """(object keys, keys of incomplete multipart uploads) under `prefix`."""
    with ObjectClient(S3Target(BUCKET, endpoint=server.endpoint), 1, 5 * MIB) as client:
        s3 = client.calls.client
        objects = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]
        uploads = [u["Key"] for u in s3.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])]
    return objects, uploads


def ended_with_objects_left(tmp_path: Path, server: Server) -> tuple[StudyPaths, str]:
    """A study whose one attempt was killed with an object and an open multipart upload left under its point's
    prefix (clean-up marked, as a killed run leaves it); returns it and that prefix."""
    paths = StudyPaths((tmp_path / "results" / "stopped").resolve())
    paths.root.mkdir(parents=True)
    paths.sweep_copy.write_text(sweep_text(tmp_path, server, "stopped"))
    sweep = load_sweep(paths.sweep_copy)
    pp = expand(sweep)[0]
    pid, now = pp.point.point_id, time.time()
    with Ledger(paths.ledger) as ledger:
        ledger.set_meta(source_path=str(paths.sweep_copy), study="stopped", backend="local")
        sync_points(ledger, [pp])
        ledger.new_attempts([(pid, "local")])
        ledger.record_updates([Update(pid, 1, State.FAILED, FailureClass.IO_ERROR, "killed", 1, "node1", now, now)])
    paths.attempt(pid, 1).dir.mkdir(parents=True)
    paths.cleanup.mkdir()
    paths.cleanup_marker(pid, 1).touch()
    fs = sweep.filesystems["s3"]
    derived = derive_places(paths, pid, pp.point.canonical(), {"s3": fs.path}, {"s3": fs.object_store})
    assert not isinstance(derived, str), derived
    target = place_target(derived[1][0])
    with ObjectClient(target, 1, 5 * MIB) as client:
        client.put(target.key("step-1/model.pt"), memoryview(b"x" * 1024), RequestCounts())
        client.calls.client.create_multipart_upload(Bucket=BUCKET, Key=target.key("step-1/optim.pt"))
    assert left_behind(server, target.prefix) != ([], [])
    return paths, target.prefix


def studyctl(*args: str, server: Server) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "studyctl.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=server.env)


def finished(proc: subprocess.Popen[str], timeout: float) -> tuple[float, str]:
    """Seconds until `proc` ended (it must, within `timeout`), and what it printed."""
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=timeout)
    return time.monotonic() - t0, out + err


def test_status_of_a_stopped_store_returns_in_seconds_and_a_later_status_cleans(
        tmp_path: Path, s3_private_server: Server) -> None:
    paths, prefix = ended_with_objects_left(tmp_path, s3_private_server)
    s3_private_server.pause()
    try:
        t0 = time.monotonic()
        proc = studyctl("sweep", "status", str(paths.root), server=s3_private_server)
        out, err = proc.communicate(timeout=CLEANUP.bound_s() + START_S)
        took = time.monotonic() - t0
        assert proc.returncode in (0, 1), out + err
        assert "not removed yet" in out + err and "stopped answering" in out + err, out + err
        assert paths.pending_cleanups(), "the clean-up stays marked"
        print(f"status against a stopped store: {took:.1f} s (bound {CLEANUP.bound_s():.0f} s + start)")
    finally:
        s3_private_server.resume()
    proc = studyctl("sweep", "status", str(paths.root), server=s3_private_server)
    _, shown = finished(proc, 120)
    assert proc.returncode in (0, 1), shown
    assert not paths.pending_cleanups(), shown
    assert left_behind(s3_private_server, prefix) == ([], [])


def _connected(pid: int, port: str) -> bool:
    """Whether process `pid` has a TCP connection to `port` on this machine."""
    listing = subprocess.run(["ss", "-tnpH", f"dport = :{port}"], capture_output=True, text=True).stdout
    return f"pid={pid}," in listing


def test_sigterm_ends_a_command_stuck_on_a_stopped_store_at_once(tmp_path: Path, s3_private_server: Server) -> None:
    paths, _ = ended_with_objects_left(tmp_path, s3_private_server)
    port = s3_private_server.endpoint.rsplit(":", 1)[1]
    s3_private_server.pause()
    try:
        proc = studyctl("sweep", "status", str(paths.root), server=s3_private_server)
        deadline = time.monotonic() + START_S
        while not _connected(proc.pid, port) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None and _connected(proc.pid, port), "status never reached the store"
        os.kill(proc.pid, signal.SIGTERM)
        took, shown = finished(proc, 30)
        assert proc.returncode != 0, shown
        assert took < 5, f"SIGTERM took {took:.1f} s to end it"
        print(f"SIGTERM to status stuck on a stopped store: ended in {took:.2f} s")
    finally:
        s3_private_server.resume()
    assert paths.pending_cleanups(), "the clean-up stays marked for a later command"


def test_submit_whose_store_stops_mid_run_returns_after_its_limit(tmp_path: Path,
                                                                 s3_private_server: Server) -> None:
    limit_s = 25
    sweep = tmp_path / "midrun.yaml"
    sweep.write_text(sweep_text(tmp_path, s3_private_server, "midrun", scale=0.05, writes=50, timeout_s=limit_s))
    results = tmp_path / "results"
    proc = studyctl("sweep", "submit", str(sweep), "--results", str(results), server=s3_private_server)
    t0 = time.monotonic()
    try:
        while proc.poll() is None and left_behind(s3_private_server, tmp_path.name) == ([], []):
            assert time.monotonic() - t0 < 120, "no object was written"
            time.sleep(0.1)
        s3_private_server.pause()
        paused = time.monotonic()
        _, shown = finished(proc, limit_s + CLEANUP.bound_s() + 60 + START_S)  # its bound: or TimeoutExpired
        after_pause = time.monotonic() - paused
        print(f"submit with its store stopped mid-run: returned {after_pause:.1f} s after the pause "
              f"(point limit {limit_s} s)")
        paths = StudyPaths((results / "midrun").resolve())
        assert paths.pending_cleanups(), shown
        assert "not removed yet" in shown, shown
    finally:
        s3_private_server.resume()
    status = studyctl("sweep", "status", "midrun", "--results", str(results), server=s3_private_server)
    _, shown = finished(status, 120)
    assert not paths.pending_cleanups(), shown
    assert left_behind(s3_private_server, tmp_path.name) == ([], [])
