"""A kept checkpoint on disk has DLIO's file and folder names and sizes, rank for rank.

The expected listing is generated here from the rules in docs/checkpoint-model.md
(written out again, independently of studyctl.definition.checkpoint.layout) and DLIO's naming
(`global_epoch1_step{N}/`, `model_{mp}_model_states.pt`, `layer_{i}-model_{mp}_model_states.pt`,
`zero_pp_rank_{dp}_mp_rank_{mp}_{model|optim}_states.pt`), never copied from a run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.definition.checkpoint.layout import Parallelism, summarize
from studyctl.definition.inputs.catalog import ModelSpec, lookup
from studyctl.definition.result.result_schema import Result
from tests.integration.test_worker import files_under, make_task, run_worker

# L=4, h=64, F=176, 8 heads / 2 KV heads, V=1000: small enough to write at full size.
TINY = ModelSpec("tiny", num_layers=4, hidden_size=64, ffn_hidden_size=176, num_attention_heads=8,
                 num_kv_heads=2, vocab_size=1000)
WEIGHT_BYTES, OPTIMIZER_BYTES = 2, 4  # bf16 weights; fp32 master, Adam m, Adam v


def dlio_listing(m: ModelSpec, tp: int, pp: int, dp: int, zero: int, steps: int) -> dict[str, int]:
    """Every file DLIO writes for `steps` checkpoints: relative path → bytes, from docs/checkpoint-model.md's rules."""
    h, f, v, n_layers = m.hidden_size, m.ffn_hidden_size, m.vocab_size, m.num_layers
    d_kv = (h // m.num_attention_heads) * m.num_kv_heads
    layer = [(h, False), (h * (h + 2 * d_kv), True), (h * h, True), (h, False), (2 * f * h, True), (f * h, True)]
    n_params = v * h + n_layers * sum(x for x, _ in layer) + h + v * h

    def elements(index: int, shard: int) -> int:  # 0 embedding, 1..L layers, L+1 output layer, L+2 final norm
        if index in (0, n_layers + 1):
            return v * h // tp // shard
        if index == n_layers + 2:
            return h // shard
        return sum((x // tp if split else x) // shard for x, split in layer)

    def stage(p: int) -> list[int]:
        sizes = [n_layers // pp + (1 if s < n_layers % pp else 0) for s in range(pp)]
        first = 1 + sum(sizes[:p])
        own = list(range(first, first + sizes[p]))
        return ([0] if p == 0 else []) + own + ([n_layers + 1, n_layers + 2] if p == pp - 1 else [])

    files: dict[str, int] = {}
    for rank in range(tp * pp * dp):
        p, d, mp = (rank // tp) % pp, rank // (tp * pp), rank % (tp * pp)
        per_rank = n_params // (dp * tp * pp) if zero >= 1 else n_params // (tp * pp)
        optim = 3 * (per_rank + 5 * h) * OPTIMIZER_BYTES
        mine: dict[str, int] = {}
        whole = sum(elements(i, 1) for i in stage(p)) * WEIGHT_BYTES
        if zero == 3:
            shard = sum(elements(i, dp) for i in stage(p)) * WEIGHT_BYTES
            mine[f"zero_pp_rank_{d}_mp_rank_{mp}_model_states.pt"] = shard
        elif d == 0 and zero == 0:
            mine[f"zero_pp_rank_0_mp_rank_{mp}_model_states.pt"] = whole
        elif d == 0 and pp == 1:
            mine[f"model_{mp}_model_states.pt"] = whole
        elif d == 0:
            mine.update({f"layer_{i}-model_{mp}_model_states.pt": elements(i, 1) * WEIGHT_BYTES for i in stage(p)})
        if zero >= 1 or d == 0:
            mine[f"zero_pp_rank_{d}_mp_rank_{mp}_optim_states.pt"] = optim
        files.update(mine)
    return {f"global_epoch1_step{s}/{name}": nbytes for s in range(1, steps + 1) for name, nbytes in files.items()}


LAYOUTS = [(zero, pp, tp) for zero in (0, 1, 3) for pp in (1, 2) for tp in (1, 2) if not (zero == 3 and pp > 1)]


@pytest.mark.parametrize(("zero", "pp", "tp"), LAYOUTS, ids=[f"zero{z}-pp{p}-tp{t}" for z, p, t in LAYOUTS])
def test_kept_checkpoint_lists_as_dlio_writes_it(tmp_path: Path, zero: int, pp: int, tp: int) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    world = tp * pp * 2  # DP 2: replica 0 and one more
    task = make_task(tmp_path, fs, world=world, zero=zero, tp=tp, pp=pp, model=TINY, scale=1.0, writes=2, reads=0,
                     keep=True)
    proc = run_worker(task, world)
    assert proc.returncode == 0, proc.stderr
    point_dir = next(fs.glob("wtest/*"))
    listing = {str(p.relative_to(point_dir)): p.stat().st_size for p in files_under(point_dir)}
    assert listing == dlio_listing(TINY, tp, pp, 2, zero, steps=2)
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    assert result.io.naming == "dlio" and result.io.fsync_per_file


def test_deepspeed_naming_and_no_fsync_are_recorded(tmp_path: Path) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=2, zero=1, model=TINY, scale=1.0, writes=1, reads=1, keep=True,
                     naming="deepspeed", fsync=False)
    proc = run_worker(task, 2)
    assert proc.returncode == 0, proc.stderr
    names = sorted(str(p.relative_to(next(fs.glob("wtest/*")))) for p in files_under(fs))
    assert names == ["global_step0/mp_rank_00_model_states.pt",
                     "global_step0/zero_pp_rank_0_mp_rank_00_optim_states.pt",
                     "global_step0/zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    assert result.io.naming == "deepspeed" and not result.io.fsync_per_file


def test_llama3_1t_runs_at_small_scale(tmp_path: Path) -> None:
    """The truncated head size (25872 // 192) no longer makes llama3-1t infeasible; scaled down it runs."""
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=2, zero=1, pp=2, model=lookup("llama3-1t"), scale=2e-6, writes=1, reads=1)
    proc = run_worker(task, 2)
    assert proc.returncode == 0, proc.stderr
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    assert result.sizes.nominal_checkpoint_bytes == summarize(lookup("llama3-1t"), Parallelism(1, 2, 1, 1)).total_bytes
    assert result.sizes.files_per_checkpoint == 128 + 3 + 2  # one file per layer index, one optimizer per rank


def test_subset_mode_writes_the_first_ranks_share(tmp_path: Path) -> None:
    """MLPerf subset mode: 2 running ranks of a TP2 × PP2 × DP2 run write exactly ranks 0 and 1's files."""
    fs = tmp_path / "fs"
    fs.mkdir()
    task = make_task(tmp_path, fs, world=2, zero=1, tp=2, pp=2, model=TINY, scale=1.0, writes=1, reads=1, keep=True,
                     subset_world_size=8)
    proc = run_worker(task, 2)
    assert proc.returncode == 0, proc.stderr
    point_dir = next(fs.glob("wtest/*"))
    listing = {str(p.relative_to(point_dir)): p.stat().st_size for p in files_under(point_dir)}
    full = dlio_listing(TINY, 2, 2, 2, 1, steps=1)
    first_two = {k: v for k, v in full.items() if k.endswith(("model_0_model_states.pt", "model_1_model_states.pt",
                                                             "_0_mp_rank_0_optim_states.pt",
                                                             "_0_mp_rank_1_optim_states.pt"))}
    assert listing == first_two
    result = Result.model_validate_json((tmp_path / "out" / "result.json").read_text())
    assert result.io.subset_world_size == 8 and result.sizes.written_checkpoint_bytes == sum(first_two.values())
