"""A study of one layout on the local disk and on the project's S3 server, end to end: submit, collect, tables and
report with request counts; nothing of it left in the bucket; credentials nowhere in the results tree; bad
credentials and an unreachable endpoint refused in one line before any rank; a rank killed mid-upload leaves no
object and no incomplete upload once the next command has run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from studyctl.objstore.client import ObjectClient
from studyctl.objstore.target import S3Target

pytestmark = pytest.mark.s3
MIB = 1 << 20

SWEEP = """\
study: {name}
models: [gpt2-125m]
matrix:
  zero_stage: 1
  nodes: 1
  ranks_per_node: 2
filesystems:
  disk: {{path: {fs}, kind: local}}
  s3: {{path: "s3://studyctl/{prefix}", kind: s3, endpoint: "{endpoint}"}}
checkpoint: {{scale: {scale}, writes: {writes}, reads: 2, buffer_mib: 16, block_mib: 4, part_mib: 5,
             s3_concurrency: 3}}
ceilings: off
calibration: off
local: {{timeout_s: 300}}
"""


def sweep_file(tmp_path: Path, server: Any, name: str = "s3study", scale: float = 0.02, writes: int = 2,
               endpoint: str | None = None) -> Path:
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(SWEEP.format(name=name, fs=fs, prefix=tmp_path.name, endpoint=endpoint or server.endpoint,
                                 scale=scale, writes=writes))
    return path


def studyctl(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "studyctl.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def left_in_bucket(server: Any, prefix: str) -> tuple[list[str], list[str]]:
    """(object keys, keys of incomplete multipart uploads) under `prefix`."""
    client = ObjectClient(S3Target("studyctl", endpoint=server.endpoint), 1, 5 * MIB)
    try:
        s3 = client.calls.client
        objects = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket="studyctl", Prefix=prefix)
                   for o in page.get("Contents", [])]
        uploads = [u["Key"] for u in s3.list_multipart_uploads(Bucket="studyctl", Prefix=prefix).get("Uploads", [])]
        return objects, uploads
    finally:
        client.close()


def test_disk_and_s3_side_by_side_with_request_counts(tmp_path: Path, s3_server: Any) -> None:
    sweep = sweep_file(tmp_path, s3_server)
    results = tmp_path / "results"
    proc = studyctl("sweep", "submit", str(sweep), "--results", str(results), env=s3_server.env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = studyctl("collect", "s3study", "--results", str(results), env=s3_server.env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    study = results / "s3study"
    checkpoints = pd.read_csv(study / "tables" / "checkpoints.csv")
    assert set(checkpoints["filesystem"]) == {"disk", "s3"}
    on_s3 = checkpoints[checkpoints["filesystem"] == "s3"]
    on_disk = checkpoints[checkpoints["filesystem"] == "disk"]
    assert (on_s3.loc[on_s3["phase"] == "write", "requests_part"] > 0).all()
    assert (on_s3.loc[on_s3["phase"] == "read", "requests_get"] > 0).all()
    assert on_disk["requests_put"].isna().all()
    summary = pd.read_csv(study / "tables" / "summary.csv")
    assert set(summary["filesystem"]) == {"disk", "s3"} and summary["requests_put"].notna().any()
    assert (study / "plots" / "requests.png").is_file() and (study / "plots" / "filesystem.png").is_file()
    report = (study / "report.md").read_text()
    assert "requests" in report.lower() and "s3" in report
    assert left_in_bucket(s3_server, tmp_path.name) == ([], [])
    secret = s3_server.secret.encode()
    leaked = [p for p in results.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert leaked == [], f"the secret key is in {leaked}"


@pytest.mark.parametrize(("change", "cause"), [({"AWS_SECRET_ACCESS_KEY": "wrong-secret"}, "credentials"),
                                              ({}, "unreachable")])
def test_bad_credentials_and_a_stopped_server_are_one_line_before_any_rank(
        tmp_path: Path, s3_server: Any, change: dict[str, str], cause: str) -> None:
    endpoint = None if change else "http://127.0.0.1:9"  # nothing listens there: a server that is not up
    sweep = sweep_file(tmp_path, s3_server, endpoint=endpoint)
    proc = studyctl("sweep", "submit", str(sweep), "--results", str(tmp_path / "results"),
                    env={**s3_server.env, **change}, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "filesystems.s3" in line]
    assert len(lines) == 1 and cause in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "wrong-secret" not in proc.stderr + proc.stdout
    assert not (tmp_path / "results" / "s3study" / "points").exists(), "nothing recorded or started"


def _rank_pids(task_dir: Path) -> list[int]:
    """The worker ranks this test's study started (their command line names its task file)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"worker" in cmd and any(str(task_dir).encode() in part for part in cmd) and b"mpiexec" not in cmd[0]:
            pids.append(int(proc.name))
    return pids


def test_a_rank_killed_mid_upload_leaves_no_object_and_no_upload(tmp_path: Path, s3_server: Any) -> None:
    sweep = sweep_file(tmp_path, s3_server, name="killed", scale=0.3, writes=4)
    results = tmp_path / "results"
    submit = subprocess.Popen(
        [sys.executable, "-m", "studyctl.cli", "sweep", "submit", str(sweep), "--results", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=s3_server.env, text=True)
    killed = False
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and submit.poll() is None and not killed:
        _, uploads = left_in_bucket(s3_server, tmp_path.name)
        pids = _rank_pids(results / "killed" / "points")
        if uploads and pids:
            os.kill(max(pids), signal.SIGKILL)  # one rank, mid multipart upload
            killed = True
        time.sleep(0.05)
    out, err = submit.communicate(timeout=300)
    assert killed, f"no upload in flight was seen: {out[-1000:]} {err[-1000:]}"
    assert submit.returncode == 1, out[-2000:] + err[-2000:]
    proc = studyctl("sweep", "status", "killed", "--results", str(results), env=s3_server.env)
    assert proc.returncode in (0, 1), proc.stderr
    assert left_in_bucket(s3_server, tmp_path.name) == ([], [])
