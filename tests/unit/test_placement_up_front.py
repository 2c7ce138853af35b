"""Before anything starts, `plan` and `submit` ask the backend the same questions: do the filesystems exist and are
they of their declared kind, does the largest point fit the disk and the memory, does each point end within the
limit it will run under. `submit` refuses (one line, exit 2, nothing recorded, nothing created); `plan` warns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from studyctl import api, host
from studyctl.backends.base import backend_class
from studyctl.backends.capacity import judge
from studyctl.backends.local import LocalBackend
from studyctl.backends.slurm.submit import point_time_limit_min
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import plan_rows, summarize_plan
from studyctl.definition.planning.sweep import load_sweep
from studyctl.units import MIB
from tests.cli import run_cli

SWEEP = """\
study: place
models: [gpt2-125m]
matrix: {{zero_stage: 1, nodes: 2, ranks_per_node: 1, strategy: {strategy}}}
filesystems:
  scratch: {{path: "{fs}"{fs_kind}}}
  tier: {{path: "{tier}", kind: {tier_kind}}}
checkpoint: {{scale: 0.001, writes: {writes}, reads: 1, buffer_mib: {buffer_mib}, block_mib: 4, tier: tier}}
training: {{simulated_step: {{compute_s: {step_s}}}}}
local: {{timeout_s: {timeout_s}}}
slurm: {{time_limit_min: {time_limit_min}}}
ceilings: off
calibration: off
"""


def sweep_file(tmp_path: Path, fs: Path | str | None = None, tier: Path | str | None = None, **over: object) -> Path:
    """A tiered two-node sweep whose filesystem and tier exist unless a test names other paths."""
    if fs is None:
        fs = tmp_path / "fs"
        fs.mkdir(exist_ok=True)
    if tier is None:
        tier = tmp_path / "tier"
        tier.mkdir(exist_ok=True)
    values: dict[str, object] = {"fs": fs, "fs_kind": "", "tier": tier, "tier_kind": "local", "strategy": "tiered",
                                 "writes": 1, "step_s": 0.05, "buffer_mib": 4, "timeout_s": 60,
                                 "time_limit_min": 10, **over}
    path = tmp_path / "place.yaml"
    path.write_text(SWEEP.format(**values))
    return path


def refused(tmp_path: Path, sweep: Path, *extra: str) -> str:
    """`sweep submit` of `sweep` on the local backend: exit 2, one line, nothing recorded; returns the line."""
    results = tmp_path / "results"
    proc = run_cli("sweep", "submit", str(sweep), "--results", str(results), *extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"studyctl: error: {sweep}: "), proc.stderr
    assert lines[0].endswith("nothing was submitted")
    assert not results.exists(), "nothing recorded: not even the study's directory"
    return lines[0]


def test_a_filesystem_path_that_does_not_exist_is_refused_up_front_and_never_created(tmp_path: Path) -> None:
    missing = tmp_path / "lustre" / "scratch"
    line = refused(tmp_path, sweep_file(tmp_path, fs=missing))
    assert f"filesystems.scratch.path: {missing} does not exist or is not a directory" in line
    assert not (tmp_path / "lustre").exists()
    plan = run_cli("plan", str(sweep_file(tmp_path, fs=missing)))
    assert plan.returncode == 0 and f"will not fit: filesystems.scratch.path: {missing} does not" in plan.stderr
    assert run_cli("plan", str(sweep_file(tmp_path, fs=missing)), "--strict").returncode == 1


@pytest.mark.parametrize("case", ["missing", "a file", "a dangling link", "missing above {node}"])
def test_a_tier_path_that_is_not_a_directory_is_refused_up_front_and_never_created(tmp_path: Path,
                                                                                   case: str) -> None:
    tier = tmp_path / "nvme"
    if case == "a file":
        tier.write_text("not a mount point")
    elif case == "a dangling link":
        tier.symlink_to(tmp_path / "gone")
    path = f"{tier}/{{node}}" if case == "missing above {node}" else str(tier)
    line = refused(tmp_path, sweep_file(tmp_path, tier=path))
    assert f"filesystems.tier.path: {tier} does not exist or is not a directory" in line
    assert not (tmp_path / "gone").exists()
    if case.startswith("missing"):
        assert not tier.exists()
    assert not list((tmp_path / "fs").iterdir()), "no data directory on the shared filesystem either"


def test_a_tier_path_per_node_is_checked_above_the_node_and_the_node_directory_is_studyctls(tmp_path: Path) -> None:
    (tmp_path / "nvme").mkdir()
    sweep = sweep_file(tmp_path, tier=f"{tmp_path}/nvme/{{node}}")
    proc = run_cli("sweep", "submit", str(sweep), "--results", str(tmp_path / "results"), "--dry-run")
    assert proc.returncode == 0, proc.stderr


def test_a_memory_tier_on_a_disk_and_a_lustre_path_on_a_disk_are_refused_up_front(tmp_path: Path) -> None:
    disk = host.mount_of(str(tmp_path))["fstype"]
    assert disk not in ("tmpfs", "ramfs"), "the test directory must be on a disk for this test"
    line = refused(tmp_path, sweep_file(tmp_path, tier_kind="memory"))
    assert (f"filesystems.tier.kind: {tmp_path / 'tier'} is on a {disk} mount, not kind memory "
            "(kind memory accepts: tmpfs, ramfs)") in line
    line = refused(tmp_path, sweep_file(tmp_path, fs_kind=", kind: lustre"))
    assert f"filesystems.scratch.kind: {tmp_path / 'fs'} is on a {disk} mount, not kind lustre" in line
    # several problems: the first, and where to see the rest
    line = refused(tmp_path, sweep_file(tmp_path, fs_kind=", kind: lustre", tier_kind="memory"))
    assert "(and 1 more: studyctl plan" in line and "--backend local lists them)" in line


def test_a_memory_tier_on_memory_passes(tmp_path: Path) -> None:
    assert host.mount_of("/dev/shm")["fstype"] == "tmpfs", "this test needs the usual tmpfs at /dev/shm"
    sweep = sweep_file(tmp_path, tier="/dev/shm", tier_kind="memory")
    proc = run_cli("sweep", "submit", str(sweep), "--results", str(tmp_path / "results"), "--dry-run")
    assert proc.returncode == 0, proc.stderr


def test_plan_with_an_unknown_backend_is_one_line_exit_2_as_submit(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path)
    for args in (["plan", str(sweep), "--backend", "nope"], ["plan", str(sweep), "--backend", "nope", "--json"],
                 ["sweep", "submit", str(sweep), "--backend", "nope", "--results", str(tmp_path / "r")]):
        proc = run_cli(*args)
        assert proc.returncode == 2 and proc.stdout == "", (args, proc.stdout)
        assert proc.stderr.strip() == "studyctl: error: --backend: 'nope' is not one of local, slurm", args
    assert not (tmp_path / "r").exists()


def test_the_estimate_counts_simulated_training_and_plan_warns_where_submit_refuses(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, writes=10, step_s=250, timeout_s=3600)
    rows = json.loads(run_cli("plan", str(sweep), "--json").stdout)
    steps = 3 + 10 * (2 * 3 + 1)  # calibration, then per write 3 idle steps before and after and one beside
    assert [r["simulated_training_s"] for r in rows] == [steps * 250]
    assert rows[0]["estimated_seconds"] > steps * 250
    plan = run_cli("plan", str(sweep))
    assert plan.returncode == 0
    assert "time: 1 point(s) need an estimated up to 18," in plan.stderr
    assert ("18,250 s of it simulated training: 73 steps (3 + 10 writes × 7) × training.simulated_step.compute_s "
            "250 s") in plan.stderr
    assert "over the 3,600 s they may run (local.timeout_s): raise it (or the sweep's estimate:" in plan.stderr
    line = refused(tmp_path, sweep)
    assert "time: 1 point(s)" in line and "(local.timeout_s)" in line
    # raised: submit no longer refuses (a dry run: nothing runs for 5 hours)
    raised = sweep_file(tmp_path, writes=10, step_s=250, timeout_s=20000)
    proc = run_cli("sweep", "submit", str(raised), "--results", str(tmp_path / "results"), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    # a sync point simulates no training: the same step adds nothing
    sync = json.loads(run_cli("plan", str(sweep_file(tmp_path, strategy="sync", writes=10, step_s=250)),
                              "--json").stdout)
    assert sync[0]["simulated_training_s"] == 0 and sync[0]["estimated_seconds"] < 60


def test_slurm_limits_count_the_training_and_a_set_limit_is_judged(tmp_path: Path) -> None:
    sweep = load_sweep(sweep_file(tmp_path, writes=10, step_s=250, time_limit_min="null"))
    (point,) = [pp.point for pp in expand(sweep) if not pp.excluded]
    derived = point_time_limit_min(sweep.slurm, point)
    assert derived * 60 >= (3 + 10 * 7) * 250 + 120, "a derived limit leaves room for the simulated training"
    assert backend_class("slurm").point_time_limit_s(sweep, point) == derived * 60
    problems, _ = api.plan_capacity(sweep, summarize_plan(plan_rows(expand(sweep), sweep)), "slurm")
    assert not [p for p in problems if p.startswith("time:")]
    set_low = load_sweep(sweep_file(tmp_path, writes=10, step_s=250, time_limit_min=60))
    problems, _ = api.plan_capacity(set_low, summarize_plan(plan_rows(expand(set_low), set_low)), "slurm")
    assert any(p.startswith("time: 1 point(s)") and "over the 3,600 s they may run (slurm.time_limit_min)" in p
               for p in problems), problems


def test_under_slurm_paths_only_the_nodes_see_are_left_to_the_worker(tmp_path: Path) -> None:
    """A shared path the submitting host does not see, and every node-local tier, are the worker's to check."""
    missing = tmp_path / "only-on-nodes"
    sweep = load_sweep(sweep_file(tmp_path, fs=missing, tier=tmp_path / "nvme", tier_kind="memory"))
    planned = expand(sweep)
    judgement = judge(sweep, backend_class("slurm"), planned, summarize_plan(plan_rows(planned, sweep)))
    assert not [r for r in judgement.refusals if "filesystems." in r]
    assert any(f"{missing} is not visible here: the workers check it" in n for n in judgement.notes)
    assert any("filesystem tier" in n and "node-local tier: each node's worker checks it" in n
               for n in judgement.notes)
    # a shared path it sees is checked as locally
    disk = host.mount_of(str(tmp_path))["fstype"]
    seen = load_sweep(sweep_file(tmp_path, fs_kind=", kind: lustre"))
    planned = expand(seen)
    judgement = judge(seen, backend_class("slurm"), planned, summarize_plan(plan_rows(planned, seen)))
    assert any(f"is on a {disk} mount, not kind lustre" in r for r in judgement.refusals)


def test_plan_and_the_local_backends_refusal_judge_memory_by_the_same_figure(tmp_path: Path) -> None:
    """A point needing more than the available memory but less than the physical total: plan once judged by the
    total (it fit) while the local backend refused by the available memory. Now both say it does not fit."""
    total, available = host.total_memory(), host.available_memory()
    assert total is not None and available is not None
    assert total - available >= 256 * MIB, "available memory too close to the total to place a point between"
    buffer_mib = ((available + total) // 2) // MIB // 2 - 96  # two simulated nodes, one rank each
    sweep = load_sweep(sweep_file(tmp_path, strategy="sync", buffer_mib=buffer_mib))
    planned = expand(sweep)
    (point,) = [pp.point for pp in planned if not pp.excluded]
    problems, _ = api.plan_capacity(sweep, summarize_plan(plan_rows(planned, sweep)), "local")
    assert any(p.startswith("memory: workers need") and "this machine's available memory has" in p
               for p in problems), problems
    refusal = LocalBackend(sweep.local).refuse(point)
    assert refusal is not None and "over this machine's available" in refusal
    judged_by = backend_class("local").capacity(sweep).host_memory_bytes
    refused_by = LocalBackend(sweep.local).machine.available_memory_bytes
    assert judged_by is not None and refused_by is not None and abs(judged_by - refused_by) < 128 * MIB
    assert total - judged_by > 128 * MIB, "not the physical total"


def test_free_space_is_never_read_from_a_parent_of_a_missing_path(tmp_path: Path) -> None:
    free, where = host.free_space(str(tmp_path / "not-mounted"))
    assert free is None and where == f"{tmp_path / 'not-mounted'} does not exist here"
    free, where = host.free_space(str(tmp_path))
    assert free is not None and free > 0 and where == str(tmp_path)
    assert os.path.isdir(tmp_path)
