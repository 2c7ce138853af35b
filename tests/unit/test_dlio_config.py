"""DLIO imports are labelled from DLIO's saved config and the user's word on the reads; differently configured
runs are separate cells, same-configured ones repetitions of one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from studyctl.analysis.collect import collect
from studyctl.analysis.dlio.importer import import_runs
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.resultgen import make_point, write_result

CUSTOM = "dlio_benchmark.plugins.experimental.src.checkpoint.pytorch_checkpointing.CustomPyTorchCheckpointing"


def dlio_run(root: Path, name: str, checkpoint: dict | None = None, seconds: float = 4.0) -> Path:
    """A DLIO folder (2 ranks, one host): two saves and one load, and a saved Hydra config if `checkpoint`."""
    run = root / name
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"num_accelerators": 2, "num_hosts": 1, "workload": "llama_7b",
                                                  "metric": {"checkpoint_size_GB": 8.0}}))
    for rank in range(2):
        records = {key: {"start": f"2026-11-22T10:0{i}:00", "end": f"2026-11-22T10:0{i}:0{int(seconds)}",
                         "duration": seconds} for i, key in enumerate(("save_ckpt1", "save_ckpt2", "load_ckpt1"))}
        (run / f"{rank}_per_epoch_stats.json").write_text(json.dumps({"1": records}))
    if checkpoint is not None:
        (run / ".hydra").mkdir()
        (run / ".hydra" / "config.yaml").write_text(json.dumps(
            {"workload": {"model": {"name": "llama_7b"}, "checkpoint": checkpoint}}))
    return run


def test_labels_come_from_the_saved_config(tmp_path: Path) -> None:
    stock = dlio_run(tmp_path, "stock", {"fsync": True})  # DLIO's stock writer ignores it
    custom = dlio_run(tmp_path, "custom", {"fsync": True, "checkpoint_mechanism_classname": CUSTOM})
    frame, runs, problems = import_runs([stock, custom])
    assert not problems
    assert [r.label for r in runs] == ["DLIO, warm reads, no fsync",
                                       "DLIO, checkpoint class CustomPyTorchCheckpointing, warm reads, "
                                       "fsync unknown (custom checkpoint class)"]
    tools = frame.groupby("point_id")["tool"].first().to_dict()
    assert sorted(tools.values()) == ["dlio", "dlio, checkpoint class CustomPyTorchCheckpointing"]
    _, runs, _ = import_runs([stock], reads="cold")
    assert runs[0].label == "DLIO, cold reads (as stated at import), no fsync"


def test_differently_configured_runs_are_separate_cells(tmp_path: Path) -> None:
    runs = [dlio_run(tmp_path / "dlio", "a", {"fsync": False}), dlio_run(tmp_path / "dlio", "b", {}),
            dlio_run(tmp_path / "dlio", "c", {"checkpoint_mechanism_classname": CUSTOM}),
            dlio_run(tmp_path / "dlio", "d", {"recovery_rank_shift": 1})]
    study = tmp_path / "results" / "s"
    write_result(study, make_point(), [3.0], [3.0])
    collect(study, import_dlio=runs)
    summary = pd.read_csv(study / "tables" / "summary.csv")
    writes = summary[summary["tool"].str.startswith("dlio") & (summary["phase"] == "write")]
    # a and b: the stock writer, same settings: one cell, two repetitions; c (custom class) and d (rank shift) apart
    assert sorted(writes["n"]) == [1, 1, 2] and len(set(writes["cell_key"])) == 3
    flags = " | ".join(summary.loc[summary["tool"] != "studyctl", "flags"])
    assert "fsync unknown (custom checkpoint class)" in flags and "warm reads" in flags


def test_cli_reads_option(tmp_path: Path) -> None:
    run = dlio_run(tmp_path / "dlio", "cold-run", {})
    study = tmp_path / "results" / "s"
    write_result(study, make_point(), [3.0], [3.0])
    Ledger(study / "ledger.sqlite").close()
    res = run_cli("collect", "s", "--results", str(tmp_path / "results"), "--import-dlio", str(run),
                  "--dlio-reads", "cold")
    assert res.returncode == 0, res.stderr
    assert "DLIO, cold reads (as stated at import), no fsync" in (study / "report.md").read_text()
    summary = pd.read_csv(study / "tables" / "summary.csv")
    read = summary[(summary["tool"] == "dlio") & (summary["phase"] == "read")].iloc[0]
    assert read["cold_read_method"] == "cold (stated at import)" and "warm" not in read["flags"]
    bad = run_cli("collect", "s", "--results", str(tmp_path / "results"), "--import-dlio", str(run),
                  "--dlio-reads", "lukewarm")
    assert bad.returncode == 2 and "--dlio-reads 'lukewarm': expected one of warm, cold" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
