"""Tiers get the shared filesystem's placement rules, for real: a memory tier on a real tmpfs runs and its mount
type is recorded; the worker itself (what runs where only compute nodes see the path) refuses a tier that is
missing or of another kind without creating it; submit refuses up front a point whose files will not fit."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from studyctl import api
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.host import free_and_total, mount_of
from tests.cli import run_cli
from tests.tmpfs import small_tmpfs

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
SWEEP = """\
study: tiers
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{zero_stage: 1, nodes: 2, ranks_per_node: 1, strategy: tiered}}
filesystems:
  scratch: {{path: "{fs}", kind: local}}
  ram: {{path: "{tier}", kind: memory}}
checkpoint: {{scale: {scale}, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4, tier: ram}}
training: {{simulated_step: {{compute_s: 0.02}}}}
local: {{timeout_s: 300}}
"""


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "64m") as mnt:
        yield mnt


def test_a_memory_tier_on_a_real_tmpfs_runs_and_its_mount_type_is_recorded(tmp_path: Path, tmpfs: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    sweep = tmp_path / "tiers.yaml"
    sweep.write_text(SWEEP.format(fs=fs, tier=f"{tmpfs}/{{node}}", scale=0.001))
    results = tmp_path / "results"
    api.submit(sweep, "local", results)
    (point,) = api.status("tiers", results).points
    assert point.latest is not None and point.latest.result_path, point.latest
    result = json.loads(Path(point.latest.result_path).read_text())
    assert result["strategy"]["tier_fstype"] == "tmpfs"
    assert result["strategy"]["tier_path"] == f"{tmpfs}/{{node}}"
    assert result["filesystem"]["fstype"] == mount_of(str(fs))["fstype"]
    assert not [p for p in tmpfs.rglob("*") if p.is_file()], "the tier's files are removed after the point"


def tiered_task(tmp_path: Path, tier: str, kind: str | None) -> Path:
    point = Point(model=lookup("gpt2-125m"), zero_stage=1, nodes=2, ranks_per_node=1, filesystem="fs",
                  checkpoint=CheckpointOptions(scale=0.001, writes=1, reads=1, buffer_mib=4, block_mib=4,
                                               strategy="tiered", tier="tier", step_s=0.02))
    (tmp_path / "fs").mkdir(exist_ok=True)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    task = WorkerTask(study="tiers", point_id=point.point_id, point=point, filesystem_path=str(tmp_path / "fs"),
                      filesystem_kind="local", result_path=str(out / "result.json"),
                      error_path=str(out / "error.json"), tier_path=tier, tier_kind=kind)
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    return path


def worker_refusal(tmp_path: Path, task: Path) -> str:
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "worker", str(task)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    error = json.loads((tmp_path / "out" / "error.json").read_text())
    assert error["failure_class"] == "config", error
    assert not [p for p in (tmp_path / "fs").rglob("*") if p.is_file()], "nothing written on shared storage"
    return str(error["reason"])


@pytest.mark.parametrize("per_node", [False, True])
def test_the_worker_never_creates_a_missing_tier(tmp_path: Path, per_node: bool) -> None:
    """What a Slurm node checks for itself: a tier path that does not exist there is refused, not made."""
    missing = tmp_path / "nvme"
    reason = worker_refusal(tmp_path, tiered_task(tmp_path, f"{missing}/{{node}}" if per_node else str(missing),
                                                  "local"))
    assert reason.startswith(f"tier filesystem path {missing} does not exist or is not a directory"), reason
    assert not missing.exists()


def test_the_worker_refuses_a_memory_tier_on_a_disk(tmp_path: Path) -> None:
    tier = tmp_path / "tier"
    tier.mkdir()
    disk = mount_of(str(tier))["fstype"]
    reason = worker_refusal(tmp_path, tiered_task(tmp_path, str(tier), "memory"))
    assert f"tier filesystem path {tier} is on a {disk} mount, not kind memory" in reason
    assert list(tier.iterdir()) == [], "nothing made on the tier"


def test_submit_refuses_a_point_that_will_not_fit_the_disk_up_front(tmp_path: Path, tmpfs: Path) -> None:
    sweep = tmp_path / "tiers.yaml"
    sweep.write_text(SWEEP.format(fs=tmpfs, tier="/dev/shm", scale=0.05))  # kind local accepts tmpfs
    row = json.loads(run_cli("plan", str(sweep), "--json").stdout)[0]
    free, _ = free_and_total(str(tmpfs))
    assert row["disk_bytes_required"] > free, (row["disk_bytes_required"], free)
    plan = run_cli("plan", str(sweep))
    assert plan.returncode == 0 and "will not fit: disk: filesystem scratch needs" in plan.stderr
    results = tmp_path / "results"
    proc = run_cli("sweep", "submit", str(sweep), "--results", str(results))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "disk: filesystem scratch needs" in line and f"free at {tmpfs}; nothing was submitted" in line
    assert not results.exists() and list(tmpfs.iterdir()) == []


@pytest.mark.parametrize("margin", [0.0, 0.9])
def test_submit_judges_free_space_as_the_worker_does_with_its_margin(tmp_path: Path, tmpfs: Path,
                                                                     margin: float) -> None:
    """~41 MiB on disk at the peak, 64 MiB free: it fits bare (and runs), but not with a 90% margin kept free,
    which the worker would refuse at run time, so submit refuses it up front."""
    sweep = tmp_path / "margin.yaml"
    sweep.write_text(f"""\
study: margin
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{zero_stage: 1, nodes: 2, ranks_per_node: 1}}
filesystems: {{scratch: {{path: "{tmpfs}"}}}}
checkpoint: {{scale: 0.025, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4, free_space_margin: {margin}}}
""")
    row = json.loads(run_cli("plan", str(sweep), "--json").stdout)[0]
    free, _ = free_and_total(str(tmpfs))
    assert row["disk_bytes_needed"] < free, "the point's files alone fit"
    results = tmp_path / "results"
    proc = run_cli("sweep", "submit", str(sweep), "--results", str(results))
    if margin:
        assert row["disk_bytes_required"] > free
        assert proc.returncode == 2 and "checkpoint.free_space_margin); 64.00 MiB free at" in proc.stderr
        assert not results.exists()
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert [p.state.value for p in api.status("margin", results).points] == ["COMPLETED"]


def test_resubmit_refuses_up_front_as_submit_does(tmp_path: Path) -> None:
    """A point failed on a read-only mount; resubmitted with a path that does not exist, it is refused in one
    line (exit 2) with no new attempt and no directory made; with a real path it runs."""
    with small_tmpfs(tmp_path, "16m", readonly=True, name="read-only") as read_only:
        sweep = tmp_path / "again.yaml"
        sweep.write_text(f"""\
study: again
ceilings: off
calibration: off
models: [gpt2-125m]
matrix: {{zero_stage: 1, nodes: 1, ranks_per_node: 2}}
filesystems: {{scratch: {{path: "{read_only}"}}}}
checkpoint: {{scale: 0.001, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4}}
""")
        results = tmp_path / "results"
        assert run_cli("sweep", "submit", str(sweep), "--results", str(results)).returncode == 1
    missing = tmp_path / "mnt" / "scratch"
    sweep.write_text(sweep.read_text().replace(str(read_only), str(missing)))
    proc = run_cli("sweep", "resubmit", "again", "--results", str(results))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"filesystems.scratch.path: {missing} does not exist" in line and "nothing was submitted" in line
    assert not (tmp_path / "mnt").exists()
    (point,) = api.status("again", results).points
    assert point.attempts == 1 and point.state.value == "FAILED"
    missing.mkdir(parents=True)
    assert run_cli("sweep", "resubmit", "again", "--results", str(results)).returncode == 0
    (point,) = api.status("again", results).points
    assert point.attempts == 2 and point.state.value == "COMPLETED"
