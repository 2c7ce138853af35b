"""Under Slurm, submit refuses up front what the submitting host can judge (a shared path it sees that is of
another kind, a point longer than slurm.time_limit_min) and leaves to each node's worker what only the nodes
see: the real cluster, no job started for a refused sweep."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from studyctl.host import mount_of
from tests.cli import run_cli
from tests.slurm.test_slurm import cli, sweep_file, wait_final

pytestmark = pytest.mark.slurm


def job_names() -> str:
    """Names of the jobs queued now or accounted in the last hour."""
    queued = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, check=True).stdout
    accounted = subprocess.run(["sacct", "-n", "-X", "-o", "JobName%80", "-S", "now-1hour"], capture_output=True,
                               text=True, check=True).stdout
    return queued + accounted


@pytest.mark.parametrize("case", ["kind", "time"])
def test_submit_refuses_what_the_submitting_host_can_judge_and_sbatch_never_runs(tmp_path: Path, case: str) -> None:
    study = f"refused-{case}-{tmp_path.name[-12:]}".replace("_", "-")
    body = "matrix: {zero_stage: 1, nodes: 1, ranks_per_node: 1, strategy: async}\n"
    if case == "time":
        body += ("checkpoint: {scale: 0.002, writes: 10, reads: 1, buffer_mib: 4, block_mib: 4}\n"
                 "training: {simulated_step: {compute_s: 60}}\nslurm: {partition: debug, time_limit_min: 5}\n")
    else:
        body += "slurm: {partition: debug, time_limit_min: 5}\n"
    sweep = sweep_file(tmp_path, study, body)
    if case == "kind":
        sweep.write_text(sweep.read_text().replace("shared: {path: " + str(tmp_path / "fs") + "}",
                                                   "shared: {path: " + str(tmp_path / "fs") + ", kind: lustre}"))
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    if case == "kind":
        fstype = mount_of(str(tmp_path / "fs"))["fstype"]
        assert f"filesystems.shared.kind: {tmp_path / 'fs'} is on a {fstype} mount, not kind lustre" in line
    else:
        assert "time: 1 point(s) need an estimated up to" in line
        assert "(3 + 10 writes × 7) × training.simulated_step.compute_s 60 s" in line
        assert "over the 300 s they may run (slurm.time_limit_min)" in line
    assert not (tmp_path / "results").exists()
    assert study not in job_names(), "no job was submitted"


def test_a_shared_path_the_submitting_host_does_not_see_is_left_to_the_nodes(tmp_path: Path) -> None:
    """The worker's own check stays: on the nodes the path is missing too, so the point fails there, with the
    worker's reason, and nothing is created."""
    missing = tmp_path / "only-on-nodes" / "fs"
    blocker = tmp_path / "a-file"  # sweep_file does not create paths below tmp_path/a-file
    blocker.write_text("x")
    sweep = sweep_file(tmp_path, "nodesee", "matrix: {zero_stage: 1, nodes: 1, ranks_per_node: 1}\n"
                       "slurm: {partition: debug, time_limit_min: 3}\n", fs=blocker / "fs")
    sweep.write_text(sweep.read_text().replace(str(blocker / "fs"), str(missing)))
    proc = run_cli("plan", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0 and f"{missing} is not visible here: the workers check it" in proc.stderr
    assert cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm").returncode == 0
    (point,) = wait_final(tmp_path, "nodesee")["points"]
    assert point["state"] == "FAILED" and point["failure_class"] == "config"
    assert f"filesystem path {missing} does not exist or is not a directory" in point["reason"]
    assert not (tmp_path / "only-on-nodes").exists()
