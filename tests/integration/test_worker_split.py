"""Per-rank time split from real ranks on real files: a many-small-files layout shows its open and
fsync time, the parts never exceed a rank's duration, and what did not happen (fsync: false; reads) counts 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.result.result_schema import CheckpointTiming, Result
from tests.integration.test_strategies import run_point
from tests.integration.test_worker import make_task, run_worker

# pipeline_parallel 2 of GPT-2 125M at a tiny scale: every rank writes one file per layer of its stage, each a few
# KiB, so the phase is creating and fsyncing files more than moving bytes
SMALL_FILES = {"model": lookup("gpt2-125m"), "pp": 2, "scale": 0.0005}


def _result(tmp_path: Path, world: int = 2, **opts: object) -> Result:
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    task = make_task(tmp_path, fs, world=world, **opts)
    proc = run_worker(task, world)
    assert proc.returncode == 0, proc.stderr
    return Result.model_validate_json((tmp_path / "out" / "result.json").read_text())


def _within_duration(timings: list[CheckpointTiming]) -> None:
    for t in timings:
        for r in t.ranks:
            s = r.split
            assert s is not None, f"{t.phase} {t.index} rank {r.rank} has no split"
            parts = s.open_s + s.transfer_s + s.fsync_s + s.close_s
            assert parts <= r.duration_s, (t.phase, r)
            assert s.other_s == pytest.approx(r.duration_s - parts, abs=1e-9)


@pytest.mark.parametrize("io_mode", ["buffered", "hybrid"])
def test_many_small_files_show_open_and_fsync_time(tmp_path: Path, io_mode: str) -> None:
    result = _result(tmp_path, io_mode=io_mode, **SMALL_FILES)
    assert result.sizes.files_per_checkpoint >= 16  # 8 per rank
    _within_duration(result.checkpoints)
    for t in result.checkpoints:
        for r in t.ranks:
            assert r.split is not None and r.split.open_s > 0 and r.split.close_s > 0 and r.split.transfer_s > 0
            if t.phase == "write":  # a few KiB per file: creating and fsyncing outweigh moving the bytes
                assert r.split.open_s + r.split.fsync_s > r.split.transfer_s, r.split
            else:
                assert r.split.fsync_s == 0


def test_a_write_without_fsync_spends_nothing_in_fsync(tmp_path: Path) -> None:
    result = _result(tmp_path, fsync=False)
    _within_duration(result.checkpoints)
    assert all(r.split is not None and r.split.fsync_s == 0 and r.split.transfer_s > 0
               for t in result.checkpoints for r in t.ranks)


@pytest.mark.parametrize("opts", [{"strategy": "async"}, {"strategy": "tiered"}, {"restore": "broadcast"}],
                         ids=["async", "tiered", "broadcast"])
def test_background_and_broadcast_phases_split_within_the_duration(tmp_path: Path, opts: dict[str, str]) -> None:
    result = run_point(tmp_path, nodes=2, rpn=1, **opts)
    _within_duration(result.checkpoints)
    writes = [r.split for t in result.checkpoints if t.phase == "write" for r in t.ranks]
    assert all(s is not None and s.fsync_s > 0 and s.transfer_s > 0 for s in writes)  # persist/tier/drain files
