"""The engine checks' own logic: the sweeps they submit (parsed and expanded by studyctl itself), the figures they
read from a real job's record and from studyctl's result files, and the verdicts of their tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import engines_bench, engines_check
from benchmarks.real_training import POSITIONS, SHAPES, STAGERS, VOCAB
from studyctl.definition.inputs.training import CPU_DISPATCH_SHARE as CPU_SHARE
from studyctl.definition.planning.expand import iter_points
from studyctl.definition.planning.sweep import load_sweep


def _points(tmp_path: Path, text: str) -> list[Any]:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(text)
    return [p.point for p in iter_points(load_sweep(sweep))]


@pytest.mark.parametrize("device", sorted(STAGERS))
def test_the_check_sweep_runs_each_engine_sync_and_dcp_async_with_each_stager(tmp_path: Path, device: str) -> None:
    idle = {"median_s": 0.3, "host_share": 0.6}
    points = _points(tmp_path, engines_check.sweep_text("s", SHAPES["tiny"], device, tmp_path, idle, 2))
    seen = sorted((p.checkpoint.engine, p.checkpoint.strategy, engines_check.stager_of(
        p.checkpoint.model_dump(), device) if p.checkpoint.strategy == "async" else "-") for p in points)
    assert seen == sorted([("torch_save", "sync", "-"), ("dcp", "sync", "-"),
                           *(("dcp", "async", name) for name in STAGERS[device])])
    for p in points:
        assert (p.checkpoint.device, p.checkpoint.state, p.zero_stage, p.world_size) == (device, "torch", 0, 1)
        assert p.checkpoint.writes == p.checkpoint.reads == 2 and p.checkpoint.scale == 1.0
    step = load_sweep(tmp_path / "sweep.yaml").training.simulated_step
    assert step.compute_s == 0.3
    # a GPU job's step launched by its host in the share measured; a CPU job's is all host: the cpu model's default
    assert (step.compute, step.dispatch_share) == (("accelerator", 0.6) if device == "cuda" else ("cpu", CPU_SHARE))


def test_the_studyctl_model_holds_the_real_models_bytes(tmp_path: Path) -> None:
    """studyctl's custom model has the real model's parameters (counted here on the meta device: no memory), and
    its checkpoint their fp32 weights + Adam m, v (12 B/param), DLIO's small 5h tensor per Adam group and a step per
    parameter tensor: as many tensors as the real job's state dict (weights, m, v, step), plus the 2 small."""
    torch = pytest.importorskip("torch")
    from benchmarks.dispatch_share import gpt2
    from studyctl.definition.checkpoint.engine_tensors import file_tensors
    from studyctl.definition.checkpoint.layout import summarize

    for name in ("tiny", "cpu"):
        shape = SHAPES[name]
        with torch.device("meta"):
            model = gpt2(torch, shape.n_embd, VOCAB, POSITIONS, False, n_layer=shape.n_layer, n_head=shape.n_head)
        params = sum(p.numel() for p in model.parameters())
        point = _points(tmp_path, engines_check.sweep_text("s", shape, "cpu", tmp_path, {"median_s": 0.3}, 1))[0]
        summary = summarize(point.model, point.parallelism, conv=point.checkpoint.convention)
        assert summary.num_parameters == params
        tensors = len(list(model.parameters()))  # AdamW keeps a 4 B `step` for each, as studyctl's file does
        assert summary.total_bytes == 12 * params + 2 * 5 * shape.n_embd * 4 + 4 * tensors
        planned = file_tensors(point.model, point.parallelism, 0, conv=point.checkpoint.convention)
        assert sum(len(f.tensors) for f in planned) == 4 * tensors + 2  # the real state's 4 per parameter + 2 small


def _record() -> dict[str, Any]:
    steps = {"torch_save_0": {"s": 3.0}, "torch_load_0": {"s": 2.0}, "dcp_save_0": {"s": 4.0},
             "dcp_load_0": {"s": 5.0},
             "dcp_async_default_0": {"blocked_s": 0.5, "persist_s": 6.0, "lost_compute_s": 1.0},
             "dcp_async_shared+async_0": {"blocked_s": 0.01, "persist_s": 7.0, "lost_compute_s": 2.0},
             "torch_save_1": {"s": 3.4}}
    return {"steps": ["env", *steps, "done"], "env": {}, "done": True, **steps}


def test_the_real_jobs_figures_are_read_per_repetition() -> None:
    got = engines_check.real_samples(_record(), "cpu")
    assert got == {"torch_save.sync": [3.0, 3.4], "torch_save.restore": [2.0], "dcp.sync": [4.0],
                   "dcp.restore": [5.0], "dcp.async.default.blocked": [0.5], "dcp.async.default.persist": [6.0],
                   "dcp.async.default.lost": [1.0], "dcp.async.shared+async.blocked": [0.01],
                   "dcp.async.shared+async.persist": [7.0], "dcp.async.shared+async.lost": [2.0]}


def _result(engine: str, strategy: str, writes: list[float], reads: list[float], **checkpoint: Any) -> dict[str, Any]:
    """A result file's sections the checks read: phases, the strategy's timings, and an engine's own calls
    (engine_s a tenth above the phase's duration, so the test tells which one was read)."""
    phases = [{"phase": "write", "duration_max_s": w} for w in writes] + \
        [{"phase": "read", "duration_max_s": r} for r in reads]
    timings = [{"phase": "write", "blocking_s": w / 10, "background_s": w, "interference_s": w / 2} for w in writes]
    asynchronous = strategy == "async"
    calls = [{"phase": "write", "engine_s": w + 0.1, "blocked_s": w / 5 if asynchronous else None,
              "persist_s": w + w / 5 if asynchronous else None} for w in writes] + \
        [{"phase": "read", "engine_s": r + 0.1} for r in reads]
    return {"point": {"checkpoint": {"engine": engine, "strategy": strategy, **checkpoint}}, "checkpoints": phases,
            "strategy": {"checkpoints": timings} if asynchronous else None,
            "engine": {"checkpoints": calls} if engine != "stream" else None}


def test_studyctls_figures_are_the_engines_own_calls() -> None:
    results = [_result("torch_save", "sync", [3.0, 3.2], [2.0]), _result("dcp", "sync", [4.0], [5.0]),
               _result("dcp", "async", [6.0], [5.1], stager_shared=True, stager_async=True, pinned=False),
               _result("dcp", "async", [8.0, 9.0], [5.2], stager_shared=False, stager_async=False)]
    got = engines_check.studyctl_samples(results, "cpu")
    assert got["torch_save.sync"] == pytest.approx([3.1, 3.3]) and got["torch_save.restore"] == [2.1]
    assert got["dcp.sync"] == [4.1] and got["dcp.restore"] == [5.1]
    assert got["dcp.async.shared+async.blocked"] == [1.2] and got["dcp.async.shared+async.persist"] == [6.0]
    assert got["dcp.async.shared+async.lost"] == [3.0]
    assert got["dcp.async.default.blocked"] == [1.6, 1.8] and got["dcp.async.default.persist"] == [8.0, 9.0]


def test_stream_points_are_read_from_their_phases_and_strategy() -> None:
    sync, background = (engines_check.engine_figures(_result("stream", s, [2.0, 4.0], [1.0])) for s in ("sync",
                                                                                                         "async"))
    assert sync == {"lost": [], "restore": [1.0], "sync": [2.0, 4.0]}
    assert background == {"lost": [1.0, 2.0], "restore": [1.0], "blocked": [0.2, 0.4], "persist": [2.0, 4.0]}


def test_the_table_gives_each_figure_its_interval_and_verdict() -> None:
    """The ratio's interval decides: inside the target, wholly beyond it, or undecided; one sample a side gives a
    ratio and no verdict; a figure one side lacks, neither."""
    real = {"torch_save.sync": [2.0, 2.02, 1.98, 2.0, 2.01, 1.99], "torch_save.restore": [1.0, 0.5, 1.0, 0.5],
            "dcp.sync": [1.0, 1.01, 0.99, 1.0], "dcp.async.default.lost": [1.0]}
    ours = {"torch_save.sync": [2.1, 2.11, 2.09, 2.1], "torch_save.restore": [0.5, 1.0, 0.5, 1.0, 1.0],
            "dcp.sync": [1.2, 1.21, 1.19, 1.2], "dcp.async.default.lost": [1.29]}
    lines = engines_check.table(real, ours, "cpu")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    assert "1.05x [" in rows["torch.save, sync"] and rows["torch.save, sync"].endswith("| yes | within |")
    assert "1.20x [" in rows["DCP save, sync"] and rows["DCP save, sync"].endswith("| **no** | **outside** |")
    assert rows["torch.load, cold restore"].endswith("| undecided (interval wider than the band) |")
    assert "1.29x (no interval: one sample) | ±30% | yes | — |" in rows["DCP async (default): lost compute"]
    assert rows["DCP load, cold restore"].endswith("| — | ±10% | — | — |")
    assert lines[-1] == "# verdicts from the intervals: 1 within, 1 outside, 1 undecided of 10"


@pytest.mark.parametrize("engine", ["stream", *engines_bench.ENGINES])
def test_the_engines_bench_sweep_runs_an_engines_points(tmp_path: Path, engine: str) -> None:
    """One point a study beside each direct run, and stream's two in one study."""
    one = _points(tmp_path, engines_bench.SWEEP.format(name="b", data=tmp_path, engine=engine, strategy="async"))
    assert [(p.checkpoint.engine, p.checkpoint.strategy) for p in one] == [(engine, "async")]
    both = _points(tmp_path, engines_bench.SWEEP.format(name="b", data=tmp_path, engine=engine,
                                                        strategy="[sync, async]"))
    assert sorted(p.checkpoint.strategy for p in both) == ["async", "sync"]
    assert {p.world_size for p in one + both} == {engines_bench.RANKS}


def test_the_direct_scripts_slowest_rank_is_its_figure() -> None:
    """Per rank: each save's record, then the one load's; the samples add to those of another run."""
    saves = ["sync", "async"]
    records = [[{"seconds": 1.0}, {"blocked_s": 0.1, "done_s": 3.0}, {"load_s": 2.5}],
               [{"seconds": 1.5}, {"blocked_s": 0.2, "done_s": 2.0}, {"load_s": 3.5}]]
    got = engines_bench.direct_samples(records, saves, {"restore": [1.0]})
    assert got == {"sync": [1.5], "restore": [1.0, 3.5], "blocked": [0.2], "persist": [2.9]}


def test_the_engines_bench_judges_the_ratio_of_each_round() -> None:
    """Each round's studyctl over the same round's direct figure; the verdict is on their median."""
    rounds = [({"dcp": {"sync": [1.0, 3.0]}}, {"dcp": {"sync": [2.08]}}),  # 1.04
              ({"dcp": {"sync": [4.0]}}, {"dcp": {"sync": [4.0]}}),  # 1.00
              ({"dcp": {"sync": [1.0]}}, {"dcp": {"sync": [1.5]}})]  # 1.50
    assert engines_bench.paired(rounds, "dcp", "sync") == "1.04x (1.00–1.50) | yes"
    assert engines_bench.paired(rounds[2:], "dcp", "sync") == "1.50x (1.50–1.50) | **no**"
    assert engines_bench.paired(rounds, "torch_save", "sync") == "— | —"
    rows = [r for r in engines_bench.tables(rounds) if r.startswith("| dcp | sync save |")]
    assert len(rows) == 2 and "1.04x (1.00–1.50) | yes |" in rows[0]


def test_the_paired_verdict_needs_the_whole_interval_inside_the_band() -> None:
    from benchmarks.equivalence import ratio_interval, verdict

    theirs = [0.40, 0.95, 0.42, 1.00, 0.98, 0.41, 0.97, 0.99, 0.43, 1.01]  # bimodal, as a persist is here
    same = [x * 1.01 for x in theirs]
    mid, low, high = ratio_interval(same, theirs)
    assert abs(mid - 1.01) < 1e-9 and low <= mid <= high and ratio_interval(same, theirs) == (mid, low, high)
    assert verdict(low, high, 0.05) == "within"
    noisy = [theirs[(i + 1) % len(theirs)] for i in range(len(theirs))]  # the same calls, paired at random
    assert verdict(*ratio_interval(noisy, theirs)[1:], 0.05).startswith("undecided")
    slower = [x * 1.3 for x in theirs]
    assert verdict(*ratio_interval(slower, theirs)[1:], 0.05) == "**outside**"
    stalled = [*same[:-1], 5.0]  # one call stalled: trimmed out of the estimate
    assert ratio_interval(stalled, theirs)[0] < 1.05


def test_the_trimmed_mean_drops_an_end_from_three_values_on_and_sides_may_be_unpaired() -> None:
    from benchmarks.equivalence import ratio_interval, trimmed_mean

    assert trimmed_mean([1.0, 9.0]) == 5.0 and trimmed_mean([1.0, 2.0, 100.0]) == 2.0
    assert trimmed_mean([0.1, 1.0, 1.0, 2.0, 2.0, 50.0]) == 1.5  # the first call's and a stalled call's dropped
    assert trimmed_mean([float(v) for v in range(16)]) == 7.5  # the middle 12 of 16
    mid, low, high = ratio_interval([2.0, 2.2, 1.8, 2.0, 2.0], [1.0, 1.1, 0.9], paired=False)
    assert mid == 2.0 and low < 2.0 < high
    with pytest.raises(ValueError, match="equal lengths"):
        ratio_interval([1.0, 2.0], [1.0], paired=True)
