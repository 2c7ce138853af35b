"""Hostile DLIO output: every damaged or implausible folder is a reason naming its file, never a traceback, and
collect keeps the rest (our results and the good DLIO folder) and exits 0."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from studyctl.analysis.collect import collect
from studyctl.analysis.dlio.importer import import_dlio, import_runs
from studyctl.errors import UserError
from tests.cli import run_cli
from tests.resultgen import make_point, write_result

GOOD_SUMMARY: dict[str, Any] = {"num_accelerators": 4, "num_hosts": 2, "workload": "llama_7b",
                                "metric": {"checkpoint_size_GB": 8.0, "save_checkpoint_io_mean_GB_per_second": 2.0,
                                           "save_checkpoint_duration_mean_seconds": 4.0}}


def good_records() -> dict[str, Any]:
    return {"1": {"save_ckpt1": {"start": "2026-11-22T10:00:00", "end": "2026-11-22T10:00:04",
                                 "duration": 4.0, "throughput": 2.0}}}


def folder(root: Path, name: str, summary: Any = None, records: Any = None, raw_summary: str | None = None,
           raw_records: str | None = None) -> Path:
    """A DLIO folder: summary.json (a value, or raw text) and rank 0's per-epoch stats (value or raw text)."""
    run = root / name
    run.mkdir(parents=True)
    text = raw_summary if raw_summary is not None else json.dumps(GOOD_SUMMARY if summary is None else summary)
    (run / "summary.json").write_text(text)
    if raw_records is not None or records is not None:
        (run / "0_per_epoch_stats.json").write_text(raw_records if raw_records is not None else json.dumps(records))
    return run


def summary_with(**changes: Any) -> dict[str, Any]:
    return {**GOOD_SUMMARY, **changes}


def metric_with(**changes: Any) -> dict[str, Any]:
    return {**GOOD_SUMMARY, "metric": {**GOOD_SUMMARY["metric"], **changes}}


def record_with(**changes: Any) -> dict[str, Any]:
    records = good_records()
    records["1"]["save_ckpt1"].update(changes)
    return records


def _fifo_records(run: Path) -> None:
    os.mkfifo(run / "1_per_epoch_stats.json")  # opening it would block collect forever


def _summary_link_out(run: Path) -> None:
    outside = run.parent / "elsewhere.json"
    outside.write_text(json.dumps(GOOD_SUMMARY))  # a perfectly good summary, but not in the folder
    (run / "summary.json").unlink()
    (run / "summary.json").symlink_to(outside)


def _summary_dir(run: Path) -> None:
    (run / "summary.json").unlink()
    (run / "summary.json").mkdir()


def _hydra(text: str) -> Callable[[Path], None]:
    def write(run: Path) -> None:
        (run / ".hydra").mkdir()
        (run / ".hydra" / "config.yaml").write_text(text)
    return write


# name → (folder kwargs, extra damage, the file the reason names, text in the reason)
CASES: dict[str, tuple[dict[str, Any], Callable[[Path], None] | None, str, str]] = {
    # hostile result folders: the ten that once crashed collect, and the two that were once tabulated
    "summary-list": ({"summary": [1, 2, 3]}, None, "summary.json", "is a JSON list, not an object"),
    "metric-string": ({"summary": summary_with(metric="fast")}, None, "summary.json", "metric = 'fast'"),
    "nan-size": ({"raw_summary": json.dumps(metric_with(checkpoint_size_GB=float("nan")))}, None, "summary.json",
                 "checkpoint_size_GB = nan"),
    "huge-size": ({"raw_summary": json.dumps(GOOD_SUMMARY).replace('"checkpoint_size_GB": 8.0',
                                                                   '"checkpoint_size_GB": 1e400')},
                  None, "summary.json", "checkpoint_size_GB = inf"),
    "string-duration": ({"records": record_with(duration="quick")}, None, "0_per_epoch_stats.json",
                        "1.save_ckpt1.duration = 'quick'"),
    "array-duration": ({"records": record_with(duration=[4.0, 5.0])}, None, "0_per_epoch_stats.json",
                       "1.save_ckpt1.duration = [4.0, 5.0]"),
    "negative-duration": ({"records": record_with(duration=-4.0, start=None, end=None)}, None,
                          "0_per_epoch_stats.json", "greater than or equal to 0"),
    "deep-nesting": ({"raw_summary": "[" * 200_000 + "]" * 200_000}, None, "summary.json", "nested too deeply"),
    "negative-hosts": ({"summary": summary_with(num_hosts=-3)}, None, "summary.json", "num_hosts = -3"),
    "petabyte-mean": ({"summary": metric_with(save_checkpoint_io_mean_GB_per_second=1e308)}, None, "summary.json",
                      "save_checkpoint_io_mean_GB_per_second = 1e+308"),
    # our own
    "truncated-summary": ({"raw_summary": json.dumps(GOOD_SUMMARY)[:40]}, None, "summary.json", "not valid JSON"),
    "records-a-string": ({"records": "save_ckpt1"}, None, "0_per_epoch_stats.json", "is a JSON str"),
    "record-a-list": ({"records": {"1": {"save_ckpt1": [4.0]}}}, None, "0_per_epoch_stats.json",
                      "1.save_ckpt1 is a JSON list"),
    "fifo-records": ({}, _fifo_records, "1_per_epoch_stats.json", "a FIFO, not a regular file"),
    "summary-links-out": ({}, _summary_link_out, "summary.json", "a symlink out of the DLIO folder"),
    "summary-a-directory": ({}, _summary_dir, "summary.json", "a directory, not a regular file"),
    "uneven-hosts": ({"summary": summary_with(num_accelerators=5)}, None, "summary.json", "not a multiple"),
    "astronomic-accelerators": ({"summary": summary_with(num_accelerators=10**30)}, None, "summary.json",
                                "num_accelerators"),
    "path-as-model": ({"summary": summary_with(workload="../../etc/passwd")}, None, "summary.json",
                      "workload name '../../etc/passwd' is not 1-64 letters"),
    "zero-seconds": ({"records": record_with(duration=0.0, start=None, end=None)}, None, "*per_epoch_stats.json",
                     "bytes in 0.0 s"),
    "petabyte-throughput": ({"summary": metric_with(checkpoint_size_GB=0.0),
                             "records": record_with(start=None, throughput=1e307)},
                            None, "0_per_epoch_stats.json", "1.save_ckpt1.throughput = 1e+307"),
    "no-time-at-all": ({"summary": {"num_hosts": 1, "metric": {"save_checkpoint_io_mean_GB_per_second": 2.0}}},
                       None, "summary.json", "no positive duration"),
    "hydra-tensor-text": ({}, _hydra("model: {name: llama_7b, parallelism: {tensor: many}}\n"), "config.yaml",
                          "model.parallelism.tensor = 'many'"),
    "hydra-too-parallel": ({}, _hydra("model: {name: llama_7b, parallelism: {tensor: 8, pipeline: 2}}\n"),
                           "config.yaml", "tensor × pipeline = 16 is more than num_accelerators = 4"),
}


def hostile_folders(root: Path) -> dict[str, Path]:
    made = {}
    for name, (kwargs, damage, _, _) in CASES.items():
        run = folder(root, name, **kwargs)
        if damage:
            damage(run)
        made[name] = run
    return made


def test_every_hostile_folder_is_a_reason_and_the_rest_is_kept(tmp_path: Path) -> None:
    assert len(CASES) >= 14
    hostile = hostile_folders(tmp_path / "dlio")
    good = folder(tmp_path / "dlio", "good", records=good_records())
    study = tmp_path / "results" / "mine"
    write_result(study, make_point(), [3.0], [3.0])
    res = collect(study, import_dlio=[*hostile.values(), good])
    by_run = {p.point_id.split("-", 2)[2]: p for p in res.problems}
    assert set(by_run) == set(CASES), set(CASES) ^ set(by_run)
    for name, (_, _, file, text) in CASES.items():
        problem = by_run[name]
        assert Path(problem.path).name == file and Path(problem.path).parent.name in (name, ".hydra"), problem
        assert text in problem.reason, (name, problem.reason)
        assert "\n" not in problem.reason and problem.attempt is None
    summary = pd.read_csv(study / "tables" / "summary.csv")
    dlio = summary[summary["tool"] == "dlio"]
    assert len(dlio) == 1 and dlio.iloc[0]["point_ids"] == f"dlio-{len(hostile)}-good"
    assert dlio.iloc[0]["bytes_over_time_GiBps"] == pytest.approx(2.0)  # 8 GiB in the 4 s between its stamps
    assert set(summary["tool"]) == {"studyctl", "dlio"} and res.points == 1
    assert summary["nodes"].max() <= 2 and summary["bytes_over_time_GiBps"].max() < 10  # no -3, no 1e308
    lines = "\n".join(res.summary_lines())
    assert "unusable result: dlio-0-summary-list: " in lines and "attempt None" not in lines
    problems = json.loads((study / "tables" / "problems.json").read_text())["invalid_results"]
    assert len(problems) == len(CASES)


def test_one_damaged_folder_alone_is_exit_2_with_its_file(tmp_path: Path) -> None:
    run = folder(tmp_path, "neg", summary=summary_with(num_hosts=-3))
    with pytest.raises(UserError, match=r"neg/summary\.json: num_hosts = -3") as err:
        import_dlio(run)
    assert err.value.exit_code == 2
    with pytest.raises(UserError, match=r"no summary\.json"):  # not a DLIO folder at all: bad input
        import_runs([tmp_path])


def test_collect_cli_exits_0_with_hostile_folders(tmp_path: Path, small_study: Path) -> None:
    study = tmp_path / "results" / small_study.name
    shutil.copytree(small_study, study)
    hostile = hostile_folders(tmp_path / "dlio")
    args = [a for run in hostile.values() for a in ("--import-dlio", str(run))]
    res = run_cli("collect", small_study.name, "--results", str(tmp_path / "results"), *args, subprocess_=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert res.stdout.count("unusable result: dlio-") == len(CASES)


def test_odd_keys_are_not_records_and_never_crash(tmp_path: Path) -> None:
    """Epoch and checkpoint numbers Python's int() refuses (5000 digits) or that only look like digits."""
    record = good_records()["1"]["save_ckpt1"]
    records = {"9" * 5000: {"save_ckpt1": record}, "\u00b2": {"save_ckpt2": record},
               "1": {"save_ckpt" + "9" * 5000: record, "load_ckpt\u00b2": record}}
    frame = import_dlio(folder(tmp_path, "odd", records=records))
    assert list(frame["phase"]) == ["write", "write"] and list(frame["index"]) == [0, 1]
