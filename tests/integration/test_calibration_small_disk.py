"""A small real filesystem (tmpfs) that holds the study's measure points but not its default calibration: the
calibration is lowered to the free space, or left out, with a line saying so; the study runs and is never refused
for a point studyctl adds itself. A measure point that does not fit still refuses it."""

from __future__ import annotations

from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from studyctl.states import State
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.tmpfs import small_tmpfs

# gpt2-125m at scale 0.002 needs about 3.5 MiB free, its default calibration (scales 0.0141, 0.1) up to 175 MiB
SWEEP = """\
study: small
models: [gpt2-125m]
matrix: {{nodes: 1, ranks_per_node: 1}}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: {scale}, writes: 1, reads: 1, buffer_mib: 8, block_mib: 4}}
"""


def sweep(tmp_path: Path, fs: Path, scale: float = 0.002) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SWEEP.format(fs=fs, scale=scale))
    return path


def test_calibration_lowered_to_a_small_disk_and_the_study_runs(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with small_tmpfs(tmp_path, "16m") as fs:
        plan = run_cli("plan", str(sweep(tmp_path, fs)), "--strict")  # plan says what submit will do
        assert plan.returncode == 0 and "will not fit" not in plan.stderr, plan.stdout + plan.stderr
        assert "note: calibration of shape" in plan.stderr and "runs at scale" in plan.stderr
        run = run_cli("sweep", "submit", str(sweep(tmp_path, fs)), "--results", str(results))
        assert run.returncode == 0, run.stdout + run.stderr
    line = next(x for x in run.stderr.splitlines() if "calibration of shape" in x)
    assert "scale 0.0141, 0.1 would need up to" in line and f"free at {fs}" in line and "runs at scale" in line
    with Ledger(StudyPaths(results / "small").ledger, readonly=True) as ledger:
        points = ledger.points()
    assert {p.point.role for p in points} == {"measure", "ceiling", "calibration"}
    assert all(p.state is State.COMPLETED for p in points)
    scales = {p.point.checkpoint.scale for p in points if p.point.role == "calibration"}
    assert scales and all(0.003 <= s < 0.0141 for s in scales)
    assert f"runs at scale {', '.join(f'{s:g}' for s in sorted(scales))} instead" in line


def test_no_room_for_calibration_leaves_it_out_and_a_measure_point_that_does_not_fit_refuses(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with small_tmpfs(tmp_path, "4m") as fs:
        dry = run_cli("sweep", "submit", str(sweep(tmp_path, fs)), "--results", str(results), "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "gets none" in dry.stderr and "2 would run" in dry.stdout  # the measure point and its ceiling
        too_big = run_cli("sweep", "submit", str(sweep(tmp_path, fs, scale=0.01)), "--results", str(results))
    assert too_big.returncode == 2
    assert "for its largest point" in too_big.stderr and "nothing was submitted" in too_big.stderr
