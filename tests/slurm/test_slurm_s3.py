"""One layout on a shared disk and on the project's S3 server, on the real local Slurm cluster: every slurmd node
reaches the same server (127.0.0.1 here), credentials travel only in the job's environment (never in a file of
the results tree), and the tables and report show both filesystems with the object store's request counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.integration.test_s3_study import left_in_bucket
from tests.slurm.test_slurm import cli, diag, not_completed, wait_final

pytestmark = [pytest.mark.slurm, pytest.mark.s3]


def test_disk_and_s3_side_by_side_on_slurm(tmp_path: Path, s3_server: Any) -> None:
    (tmp_path / "fs").mkdir()
    sweep = tmp_path / "s3slurm.yaml"
    sweep.write_text(f"""\
study: s3slurm
models: [gpt2-125m]
matrix: {{nodes: 2, ranks_per_node: 1, zero_stage: 1, restore: [rank, broadcast]}}
filesystems:
  shared: {{path: {tmp_path / 'fs'}}}
  s3: {{path: "s3://studyctl/{tmp_path.name}", kind: s3, endpoint: "{s3_server.endpoint}"}}
checkpoint: {{scale: 0.01, writes: 2, reads: 2, buffer_mib: 16, block_mib: 4, part_mib: 5, s3_concurrency: 2}}
slurm: {{partition: debug, time_limit_min: 3}}
ceilings: off
calibration: off
""")
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    data = wait_final(tmp_path, "s3slurm")
    assert data["counts"] == {"COMPLETED": 4}, f"{not_completed(data)}{diag(tmp_path, 's3slurm')}"
    proc = cli(tmp_path, "collect", "s3slurm")
    assert proc.returncode == 0, proc.stderr
    study = tmp_path / "results" / "s3slurm"
    checkpoints = pd.read_csv(study / "tables" / "checkpoints.csv")
    assert set(checkpoints["filesystem"]) == {"shared", "s3"}
    on_s3 = checkpoints[checkpoints["filesystem"] == "s3"]
    assert (on_s3["requests_put"].where(on_s3["phase"] == "write", 1) > 0).all()
    assert (on_s3["requests_get"].where(on_s3["phase"] == "read", 1) > 0).all()
    assert "Object store requests" in (study / "report.md").read_text()
    assert left_in_bucket(s3_server, tmp_path.name) == ([], [])
    secret = s3_server.secret.encode()
    assert [p for p in study.rglob("*") if p.is_file() and secret in p.read_bytes()] == []
