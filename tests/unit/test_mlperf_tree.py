"""The v3.0-shaped results tree (`studyctl mlperf STUDY --out DIR`) of a study made of real result files:
its files, MLPerf's metric names in GB = 10^9 B, per-rank stats, the system description with blanks and notes,
no credentials, atomic replacement of its own tree only; and the --rules option's one-line refusal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from studyctl.analysis.mlperf.tree import MARKER, SUBMITTER
from studyctl.analysis.mlperf.view import figures
from studyctl.analysis.report.mlperf import load_results, mlperf_for_study
from studyctl.attempt.paths import StudyPaths
from studyctl.errors import UserError
from tests.cli import run_cli
from tests.resultgen import make_point, write_result

SWEEP = """\
study: tree
filesystems:
  objects: {kind: s3, path: "s3://studyctl/ckpt", endpoint: "http://127.0.0.1:8333", region: us-east-1,
            secret_access_key: NEVER-SHOWN}
  scratch: {path: /mnt/scratch}
"""
METRICS = {f"{phase}_checkpoint_{what}" for phase in ("save", "load") for what in
           ("io_mean_GB_per_second", "io_stdev_GB_per_second", "duration_mean_seconds", "duration_stdev_seconds")}


def study(tmp_path: Path) -> Path:
    root = tmp_path / "results" / "tree"
    write_result(root, make_point("llama3-8b", zero=3, rpn=8, fs="objects", writes=10, reads=10), [2.0] * 10,
                 [3.0, 2.5] * 5)
    write_result(root, make_point("gpt2-125m", rpn=2, fs="scratch"), [1.0, 1.5], [2.0, 2.0])
    StudyPaths(root).sweep_copy.write_text(SWEEP)
    return root


def leaf(out: Path, model: str, system: str = "tree-objects") -> Path:
    (found,) = (out / "closed" / SUBMITTER / "results" / system / "checkpointing" / model).glob("2*_*")
    return found


def test_the_tree_holds_mlperf_files_per_model(tmp_path: Path) -> None:
    root, out = study(tmp_path), tmp_path / "submission"
    verdicts, _, _ = mlperf_for_study(root, "tree", "v3.0", out)
    llama = next(r for r in load_results(root) if r.point.model.name == "llama3-8b")
    here = leaf(out, "llama3-8b")
    stamp = here.name
    assert sorted(p.name for p in here.iterdir()) == sorted(
        ["summary.json", "provenance.json", f"checkpointing_{stamp}_metadata.json",
         *(f"{rank}_per_epoch_stats.json" for rank in range(8))])
    summary = json.loads((here / "summary.json").read_text())
    assert set(summary["metric"]) == METRICS | {"checkpoint_size_GB"}
    assert summary["metric"]["checkpoint_size_GB"] == llama.sizes.written_checkpoint_bytes / 1e9
    f = figures(llama)
    assert summary["metric"]["save_checkpoint_io_mean_GB_per_second"] == pytest.approx(f.write_throughput_GBps)
    assert summary["metric"]["load_checkpoint_duration_mean_seconds"] == pytest.approx(f.read_duration_s)
    assert summary["metric"]["load_checkpoint_io_stdev_GB_per_second"] > 0  # two read speeds alternate
    assert summary["num_accelerators"] == 8 and "10^9" in summary["studyctl"]["units"]

    rank7 = json.loads((here / "7_per_epoch_stats.json").read_text())["1"]
    assert sorted(rank7) == sorted([*(f"save_ckpt{n}" for n in range(1, 11)), *(f"load_ckpt{n}" for n in range(1, 11))])
    first = next(c for c in llama.checkpoints if c.phase == "write")
    assert rank7["save_ckpt1"]["duration"] == first.ranks[7].duration_s
    assert rank7["save_ckpt1"]["throughput"] == pytest.approx(first.bytes / 1e9 / first.ranks[7].duration_s)
    meta = json.loads((here / f"checkpointing_{stamp}_metadata.json").read_text())
    assert meta["parameters"]["storage"]["storage_type"] == "s3" and meta["accelerator"] is None
    stamp_file = json.loads((here / "provenance.json").read_text())
    assert stamp_file["rules_edition"] == "3.0" and stamp_file["storage_library"]["name"] == "unknown"
    assert (out / MARKER).is_file() and [v.model for v in verdicts] == ["gpt2-125m", "llama3-8b"]


def test_verdicts_and_system_description_show_what_studyctl_cannot_know(tmp_path: Path) -> None:
    root, out = study(tmp_path), tmp_path / "submission"
    mlperf_for_study(root, "tree", "v3.0", out)
    workload = leaf(out, "llama3-8b").parent
    verdicts = json.loads((workload / "studyctl_verdicts.json").read_text())
    by_rule = {c["rule"]: c for c in verdicts["checks"]}
    assert by_rule["storage API"]["verdict"] == "pass" and by_rule["full size"]["verdict"] == "fail"
    assert by_rule["accelerator memory"]["verdict"] == "unknown" and "§4.3.4" in by_rule["accelerator memory"]["source"]
    assert "system_under_test.clients[0].chassis.model_name" in verdicts["system_description_blank"]
    assert any("dlio_config" in item for item in verdicts["not_made_by_studyctl"])

    systems = out / "closed" / SUBMITTER / "systems"
    assert sorted(p.name for p in systems.iterdir()) == ["tree-objects.yaml", "tree-scratch.yaml"]
    assert yaml.safe_load((systems / "tree-scratch.yaml").read_text())["system_under_test"]["solution"][
        "architecture"]["benchmark_API"] == "file"
    text = (systems / "tree-objects.yaml").read_text()
    sut = yaml.safe_load(text)["system_under_test"]
    client = sut["clients"][0]
    assert client["chassis"]["model_name"] is None and "does not read the hardware model" in text
    assert client["quantity"] == 1 and sut["solution"]["capabilities"]["remap_time_in_seconds"] is None
    assert {e["name"]: e["value"] for e in client["environment"]} in (
        {"endpoint": "http://127.0.0.1:8333", "region": "us-east-1"},
        {"endpoint": "http://127.0.0.1:8333", "region": "us-east-1", "addressing": "path"})
    everything = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert "NEVER-SHOWN" not in everything


def test_v2_judges_the_same_object_study_differently(tmp_path: Path) -> None:
    root, out = study(tmp_path), tmp_path / "submission"
    mlperf_for_study(root, "tree", "v2.0", out)
    verdicts = json.loads((leaf(out, "llama3-8b").parent / "studyctl_verdicts.json").read_text())
    assert {c["rule"]: c["verdict"] for c in verdicts["checks"]}["storage API"] == "fail"
    assert verdicts["rules_edition"] == "2.0"


def test_the_tree_replaces_only_its_own_and_leaves_no_temporaries(tmp_path: Path) -> None:
    root, out = study(tmp_path), tmp_path / "submission"
    mlperf_for_study(root, "tree", "v3.0", out)
    stale = out / "closed" / "stale.txt"
    stale.write_text("from before")
    mlperf_for_study(root, "tree", "v3.0", out)
    assert not stale.exists() and (out / MARKER).is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["results", "submission"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == sorted(
        [".submission.studyctl-lock", os.readlink(out)]), "beside it: the lock and the one tree it links to"

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(UserError, match="not a tree studyctl wrote"):
        mlperf_for_study(root, "tree", "v3.0", foreign)
    assert (foreign / "notes.txt").read_text() == "keep"


def test_cli_refuses_unknown_rules_in_one_line_and_writes_the_tree(tmp_path: Path) -> None:
    root = study(tmp_path)
    bad = run_cli("mlperf", "tree", "--results", str(root.parent), "--rules", "v9")
    assert bad.returncode == 2 and "--rules 'v9': expected one of v2.0, v3.0" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    good = run_cli("mlperf", "tree", "--results", str(root.parent), "--out", str(tmp_path / "t"))
    assert good.returncode == 0, good.stderr
    assert "llama3-8b: does not meet CLOSED v3.0 (no point met: full size; unknown: accelerator memory)" in good.stdout
    assert f"MLPerf results tree: {tmp_path / 't'}" in good.stdout
