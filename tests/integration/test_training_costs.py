"""A real small study with strategies through `collect`: the training table, its cells, plots and report section."""

from __future__ import annotations

from pathlib import Path

import pytest

STUDY = """\
study: costs
ceilings: off
models: [gpt2-125m]
matrix: {{nodes: [1, 2], ranks_per_node: 1, zero_stage: 1, strategy: [sync, async, tiered], restore: [rank, broadcast]}}
exclude: [{{nodes: 1, restore: broadcast, reason: one replica has no one to broadcast to}}]
filesystems:
  shared: {{path: {fs}}}
  tier: {{path: {tier}, kind: local}}
checkpoint: {{scale: 0.002, writes: 2, reads: 1, buffer_mib: 4, block_mib: 4, tier: tier}}
calibration: {{enabled: false}}  # the plain-scaling arithmetic: no second scale to fit from
training: {{step_s: 0.02, simulated_step: {{compute_s: 0.02}}, interval_steps: 3000, node_mtbf_h: 2000, nodes: 64}}
"""


def test_a_study_tabulates_and_plots_what_checkpoints_cost(tmp_path: Path) -> None:
    import pandas as pd

    from studyctl import api
    from studyctl.definition.inputs import training as tc

    for name in ("fs", "tier"):
        (tmp_path / name).mkdir()
    sweep = tmp_path / "costs.yaml"
    sweep.write_text(STUDY.format(fs=tmp_path / "fs", tier=tmp_path / "tier"))
    api.submit(sweep, "local", tmp_path / "results")
    outcome = api.collect("costs", tmp_path / "results")
    assert outcome.completed == 9 and outcome.failed == 0
    table = pd.read_csv(tmp_path / "results" / "costs" / "tables" / "training.csv")
    assert sorted(table["strategy"].value_counts().tolist()) == [3, 3, 3]
    interval, mtbf = 3000 * 0.02, 2000 * 3600 / 64
    for row in table.itertuples():
        assert row.projected and row.projection_factor == pytest.approx(row.nominal_checkpoint_bytes
                                                                        / row.checkpoint_bytes, rel=1e-9)
        assert row.blocking_s == pytest.approx(row.blocking_measured_s * row.projection_factor, rel=1e-9)
        lag = 0.0 if row.strategy == "sync" else row.background_s
        cost = row.blocking_s + (0.0 if row.strategy == "sync" else row.interference_s) + max(lag - interval, 0.0)
        assert row.checkpoint_cost_s == pytest.approx(cost, rel=1e-9)
        # a share of wall time, held to [0, 1]: a negative cost (interference noise on this machine) wastes nothing
        waste = min(max(tc.total_waste_share(interval, cost, mtbf, row.restart_s, lag), 0.0), 1.0)
        assert row.total_waste == pytest.approx(waste, rel=1e-9, abs=1e-12)
        assert row.daly_interval_s == pytest.approx(tc.daly_interval_s(cost, mtbf), rel=1e-9, nan_ok=True)
        assert row.restart_s >= row.failure_restore_s > 0
        assert row.blocking_measured_s <= row.durable_measured_s
    study = tmp_path / "results" / "costs"
    plots = {p.name for p in (study / "plots").glob("*.png")}
    assert {"overhead_gpt2-125m.png", "restore_time.png"} <= plots
    report = (study / "report.md").read_text()
    assert "Total waste vs nodes, one line per setting, 95% CI" in report
    section = report.split("## What checkpoints cost training", 1)[1].split("\n## ", 1)[0]
    for stated in ("**interval**: 1 min of compute between checkpoints (3000 steps × 0.02 s",
                   "**failures**: node MTBF 2000 h; job of 64 node(s)",
                   "per-node rates measured on 1, 2 node(s) assumed to hold at 64 nodes", "**projections**"):
        assert stated in section
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 9, "each point is a cell of one repetition"
    assert all("one repetition" in r and "simulated nodes (one host)" in r for r in rows)
    tiered = table[table["strategy"] == "tiered"]
    no_failure = sum("no-failure restore" in r for r in rows)
    assert no_failure == int((tiered["replaced_nodes"] == 0).sum())
