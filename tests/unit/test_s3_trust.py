"""A study directory never chooses where this user's credentials go: a received study whose sweep copy names
another endpoint gets no request from status or resubmit (a recording endpoint proves it), and a user name or
password in an endpoint is never printed, whatever it holds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from studyctl.attempt.paths import StudyPaths
from studyctl.attempt.records import Update
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import load_sweep
from studyctl.states import FailureClass, State
from studyctl.study.ledger import Ledger
from studyctl.study.store import sync_points
from tests.cli import run_cli
from tests.recording_endpoint import recording_endpoint

SWEEP = """\
study: {name}
models: [gpt2-125m]
matrix: {{zero_stage: 1, nodes: 1, ranks_per_node: 1}}
filesystems:
  s3: {{path: "s3://studyctl/received", kind: s3, endpoint: '{endpoint}'}}
checkpoint: {{scale: 0.001, writes: 1, reads: 1, buffer_mib: 16, block_mib: 4, part_mib: 5}}
ceilings: off
calibration: off
"""
KEY_ID = "RECEIVER-KEY-ID"


def received_study(results: Path, endpoint: str, name: str = "received") -> StudyPaths:
    """A study as a colleague's archive brings it: its sweep copy names `endpoint`, its one attempt ended
    without task.json and its clean-up is still marked."""
    paths = StudyPaths((results / name).resolve())
    paths.root.mkdir(parents=True)
    paths.sweep_copy.write_text(SWEEP.format(name=name, endpoint=endpoint))
    planned = expand(load_sweep(paths.sweep_copy))
    now = time.time()
    with Ledger(paths.ledger) as ledger:
        ledger.set_meta(source_path="/nonexistent/sender/sweep.yaml", study=name, backend="local")
        sync_points(ledger, planned)
        pid = planned[0].point.point_id
        ledger.new_attempts([(pid, "local")])
        ledger.record_updates([Update(pid, 1, State.FAILED, FailureClass.IO_ERROR, "killed", 1, "node1", now, now)])
    paths.attempt(pid, 1).dir.mkdir(parents=True)
    paths.cleanup.mkdir()
    paths.cleanup_marker(pid, 1).touch()
    return paths


def studyctl(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("STUDYCTL_S3", "AWS_"))}
    return subprocess.run([sys.executable, "-m", "studyctl.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**clean, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": "receiver-secret",
                               **env})


def test_status_of_a_received_study_sends_nothing_to_the_endpoint_it_names(tmp_path: Path) -> None:
    with recording_endpoint() as (endpoint, seen):
        paths = received_study(tmp_path / "results", endpoint)
        proc = studyctl("sweep", "status", str(paths.root))
        assert seen == [], f"{len(seen)} requests signed by the receiver went to the study's endpoint"
    assert proc.returncode in (0, 1), proc.stderr
    assert "not contacted" in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert paths.pending_cleanups(), "the clean-up stays marked for a command that may contact the store"


def test_resubmit_of_a_received_study_is_refused_without_a_request(tmp_path: Path) -> None:
    with recording_endpoint() as (endpoint, seen):
        paths = received_study(tmp_path / "results", endpoint)
        proc = studyctl("sweep", "resubmit", str(paths.root))
        assert seen == []
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not contacted" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(paths.root.glob("points/*/attempt-2")), "nothing started"


def test_an_endpoint_the_user_trusts_is_contacted(tmp_path: Path) -> None:
    """The other side of the rule (and proof that the recorder sees what status sends)."""
    with recording_endpoint() as (endpoint, seen):
        paths = received_study(tmp_path / "results", endpoint)
        proc = studyctl("sweep", "status", str(paths.root), STUDYCTL_S3_TRUSTED=endpoint)
        assert seen and all(KEY_ID in s for s in seen), proc.stdout + proc.stderr
    assert paths.pending_cleanups(), "a store answering 503 is not clean: marked still"


# a password or user name with any of the characters that break a naive mask (no `$`: a sweep expands it)
SECRET = st.text(st.sampled_from("abcXYZ019/@:%#?!&*+=~[]{}.,;-_^|<>()"), min_size=1, max_size=16)


@settings(max_examples=60, deadline=None)
@given(user=st.one_of(st.just(""), SECRET), password=SECRET, with_password=st.booleans(),
       command=st.sampled_from(["plan", "submit"]))
def test_no_user_or_password_in_an_endpoint_is_ever_printed(tmp_path_factory: object, user: str, password: str,
                                                           with_password: bool, command: str) -> None:
    marker_user, marker_password = f"Usr{user}Q", f"Pw{password}Q"
    userinfo = f"{marker_user}:{marker_password}" if with_password else marker_user
    directory = Path(tmp_path_factory.mktemp("pw"))  # type: ignore[attr-defined]
    sweep = directory / "pw.yaml"
    endpoint = f"http://{userinfo}@127.0.0.1:9".replace("'", "''")
    sweep.write_text(SWEEP.format(name="pw", endpoint=endpoint))
    args = ["plan", str(sweep)] if command == "plan" else ["sweep", "submit", str(sweep), "--results",
                                                            str(directory / "results")]
    out = run_cli(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    shown = out.stdout + out.stderr
    assert "endpoint" in shown
    for secret in (marker_user, marker_password) if with_password else (marker_user,):
        assert secret not in shown, shown
