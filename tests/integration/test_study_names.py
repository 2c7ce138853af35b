"""A study name in a results directory names one study: a different sweep under it is refused, a widened one is not."""

from __future__ import annotations

from pathlib import Path

from studyctl.attempt.paths import StudyPaths
from tests.cli import run_cli

SWEEP = """\
study: named
ceilings: off
calibration: off
models: [{model}]
matrix: {{nodes: 1, ranks_per_node: 1, block_mib: {blocks}}}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: 0.002, writes: 1, reads: 1, buffer_mib: 8, block_mib: 4}}
{extra}"""


def sweep(tmp_path: Path, name: str, model: str = "gpt2-125m", blocks: str = "[4]", extra: str = "") -> Path:
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.yaml"
    path.write_text(SWEEP.format(model=model, blocks=blocks, fs=fs, extra=extra))
    return path


def test_a_different_sweep_under_an_existing_study_name_is_refused(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = run_cli("sweep", "submit", str(sweep(tmp_path, "a")), "--results", str(results))
    assert first.returncode == 0, first.stdout + first.stderr
    study = StudyPaths(results / "named")
    recorded, ledger = study.sweep_copy.read_bytes(), study.ledger.read_bytes()
    other = run_cli("sweep", "submit", str(sweep(tmp_path, "b", model="llama_7b")), "--results", str(results))
    assert other.returncode == 2
    message = other.stdout + other.stderr
    assert "study named" in message and str(study.sweep_copy) in message
    assert "use another study name or --results" in message and "Traceback" not in message
    assert len(message.strip().splitlines()) == 1
    assert study.sweep_copy.read_bytes() == recorded and study.ledger.read_bytes() == ledger  # nothing touched
    dry = run_cli("sweep", "submit", str(sweep(tmp_path, "c", model="llama_7b")), "--results", str(results),
                  "--dry-run")
    assert dry.returncode == 2
    elsewhere = run_cli("sweep", "submit", str(sweep(tmp_path, "d", model="llama_7b")), "--results",
                        str(tmp_path / "other-results"), "--dry-run")
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr


def test_the_same_study_widened_or_with_exclusions_is_accepted(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert run_cli("sweep", "submit", str(sweep(tmp_path, "a")), "--results", str(results)).returncode == 0
    widened = sweep(tmp_path, "wide", blocks="[4, 8]", extra="# a comment\nexclude: [{block_mib: 8}]\n")
    again = run_cli("sweep", "submit", str(widened), "--results", str(results), "--dry-run")
    assert again.returncode == 0, again.stdout + again.stderr
    narrowed_by_editing = sweep(tmp_path, "narrow", blocks="[8]")
    assert run_cli("sweep", "submit", str(narrowed_by_editing), "--results", str(results),
                   "--dry-run").returncode == 2
