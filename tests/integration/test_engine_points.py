"""Points with a checkpoint engine (torch_save, dcp) through the worker, for real: mpiexec ranks, real tensors,
real files (and the project's S3 server). Every restore is checked against what was saved (the worker compares
per-file hashes with STUDYCTL_VERIFY_RESTORES set), every result is schema-valid and plausible, and the
engine's bytes exceed the plan's by no more than its framing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from studyctl import api as study
from studyctl.definition.checkpoint.engines import engine_framing_bytes
from studyctl.definition.result.plausibility import implausible
from studyctl.definition.result.result_schema import Result
from tests.integration.test_strategies import files_under, run_point

VERIFY = "STUDYCTL_VERIFY_RESTORES"


@pytest.fixture(autouse=True)
def _verify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERIFY, "1")


def check(result: Result) -> None:
    """Plausible; the engine section has every checkpoint and restore, each read verified equal, and the
    bytes within the framing bound of the plan's."""
    assert implausible(result) is None
    engine = result.engine
    assert engine is not None and engine.engine == result.point.checkpoint.engine
    assert engine.on_gpu is False and engine.device == "cpu"
    opts = result.point.checkpoint
    assert (engine.state, engine.replicated_writer) == (opts.state, opts.replicated_writer)
    assert [(t.phase, t.index) for t in engine.checkpoints] == [(c.phase, c.index) for c in result.checkpoints]
    plan = {"write": result.sizes.written_checkpoint_bytes, "read": result.sizes.read_bytes_per_restore}
    for t, c in zip(engine.checkpoints, result.checkpoints, strict=True):
        slack = engine_framing_bytes(c.phase, c.files, engine.tensors_per_rank_max, result.point.world_size)
        assert plan[c.phase] < c.bytes <= plan[c.phase] + slack
        assert 0 < t.engine_s <= c.span_s * 1.001 + 1e-3
        if t.phase == "read":
            assert t.verified is True
        streams = opts.engine == "torch_save"
        assert (t.storage_s is not None) == streams
        if t.storage_s is not None:
            assert 0 < t.storage_s <= t.engine_s + 1e-3
        if opts.strategy == "async" and t.phase == "write":
            assert t.blocked_s is not None and t.staged_s is not None and t.persist_s is not None
            assert 0 <= t.blocked_s <= t.staged_s <= t.persist_s
        costed = t.phase == "read" or opts.strategy == "sync"  # the calls made on training's time, start to end
        assert (t.cpu_s is not None, t.minor_faults is not None) == (costed, costed)
        if t.cpu_s is not None:
            assert t.cpu_s > 0, "serialising or deserialising real tensors takes the process CPU"


# (engine, strategy, restore, state, replicated_writer, nodes, ranks per node, ZeRO, extra options)
POINTS = [
    ("torch_save", "sync", "full", "torch", "spread", 1, 2, 0, {}),
    ("dcp", "sync", "rank", "megatron", "dp0", 1, 2, 1, {"dcp_threads": 2}),
    ("torch_save", "async", "broadcast", "megatron", "dp0", 1, 2, 1, {"crc32": False}),
    ("dcp", "async", "broadcast", "torch", "spread", 1, 2, 0, {"stager_async": True}),
    ("dcp", "tiered", "rank", "megatron", "spread", 2, 1, 1, {"replaced_nodes": 1, "tier_keep": 2}),
    ("torch_save", "tiered", "full", "torch", "dp0", 2, 2, 1, {"drain": "node", "tier_keep": 2}),
    ("torch_save", "sync", "broadcast", "torch", "spread", 1, 2, 3, {}),  # ZeRO-3: nothing replicated to send
    ("dcp", "async", "broadcast", "megatron", "dp0", 2, 1, 3, {}),
]


@pytest.mark.parametrize(("engine", "strategy", "restore", "state", "writer", "nodes", "rpn", "zero", "extra"),
                         POINTS)
def test_engine_points_save_restore_and_record(tmp_path: Path, engine: str, strategy: str, restore: str, state: str,
                                               writer: str, nodes: int, rpn: int, zero: int,
                                               extra: dict[str, Any]) -> None:
    result = run_point(tmp_path, nodes=nodes, rpn=rpn, zero=zero, engine=engine, strategy=strategy, restore=restore,
                       state=state, replicated_writer=writer, **extra)
    check(result)
    info = result.strategy
    assert info is not None and (info.strategy, info.restore_mode) == (strategy, restore)
    if strategy != "sync":
        writes = [t for t in info.checkpoints if t.phase == "write"]
        assert all(t.background_bytes > 0 and t.compute_steps > 0 for t in writes)
    if strategy == "tiered":
        reads = [t for t in info.checkpoints if t.phase == "read"]
        assert all(t.tier_bytes > 0 for t in reads), "the surviving nodes restore from their tier"
        if extra.get("replaced_nodes"):
            assert all(t.shared_bytes > 0 for t in reads), "a replaced node restores from shared storage"
    if restore == "broadcast":
        replicated = zero < 3  # the model states DP replicas share; ZeRO-3 partitions them too
        assert all((t.broadcast_bytes > 0) == replicated for t in info.checkpoints if t.phase == "read")
    assert not files_under(tmp_path / "fs"), "the point's files are removed"
    assert not files_under(tmp_path / "tier")


def test_a_gpu_asked_for_where_none_is_fails_config_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(AssertionError):  # run_point asserts exit 0: the worker exits 3 on a known failure
        run_point(tmp_path, engine="torch_save", device="cuda")
    error = json.loads((tmp_path / "out" / "error.json").read_text())
    assert error["failure_class"] == "config" and "checkpoint.device cuda" in error["reason"]
    assert "\n" not in error["reason"]
    assert not any((tmp_path / "fs").iterdir()), "nothing was written"


SWEEP = """\
study: engines
ceilings: off
models: [gpt2-125m]
matrix:
  zero_stage: 1
  nodes: 1
  ranks_per_node: 2
  engine: [stream, torch_save, dcp]
  state: [megatron, torch]
  replicated_writer: [dp0, spread]
filesystems:
  disk: {{path: {disk}}}
checkpoint: {{scale: 0.002, writes: 2, reads: 1, restore: full, buffer_mib: 4, block_mib: 1}}
local: {{max_concurrent: 1, timeout_s: 300}}
estimate: {{overhead_s: 0, GiBps_per_node: 1000}}
calibration: {{enabled: false}}
"""


def test_a_local_study_varies_engine_state_and_writer(tmp_path: Path) -> None:
    """The quickstart path: a sweep file submitted to the local backend; every point COMPLETED and valid."""
    disk = tmp_path / "disk"
    disk.mkdir()
    sweep = tmp_path / "engines.yaml"
    sweep.write_text(SWEEP.format(disk=disk))
    results = tmp_path / "results"
    rep = study.submit(sweep, "local", results)
    assert rep.launched == 12
    status = study.status("engines", results)
    assert status.counts == {"COMPLETED": 12}
    seen = set()
    for p in status.points:
        result = Result.model_validate_json(Path(p.latest.result_path).read_text())
        opts = result.point.checkpoint
        seen.add((opts.engine, opts.state, opts.replicated_writer))
        if opts.engine == "stream":
            assert result.engine is None and implausible(result) is None
        else:
            check(result)
    assert len(seen) == 12


@pytest.mark.s3
@pytest.mark.parametrize(("strategy", "restore"), [("sync", "full"), ("async", "broadcast")])
def test_torch_save_on_the_s3_server(tmp_path: Path, s3_server: Any, strategy: str, restore: str) -> None:
    """torch.save streams each file into an object (multipart above a part) and torch.load reads it back with
    ranged GETs; the time inside the requests is the engine's storage time; nothing is left on the store."""
    from tests.integration.test_s3_worker import keys_under, run_worker, s3_task

    extra: dict[str, Any] = {"step_s": 0.02, "compute": "accelerator"} if strategy == "async" else {}
    task_path, task = s3_task(tmp_path, s3_server, engine="torch_save", strategy=strategy, restore=restore, **extra)
    proc = run_worker(task_path, 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = Result.model_validate_json(Path(task.result_path).read_text())
    check(result)
    assert all(x.requests is not None and x.requests.put + x.requests.part > 0
               for c in result.checkpoints if c.phase == "write" for x in c.ranks if x.bytes)
    assert not keys_under(s3_server, f"{tmp_path.name}/")
