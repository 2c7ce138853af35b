"""The catalog: real parameter counts, DLIO-exact defaults, llama3-1t feasible, inline models built on a base."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from studyctl.definition.checkpoint.layout import (
    Parallelism,
    dlio_reported_bytes,
    layout_problems,
    num_parameters,
    summarize,
)
from studyctl.definition.checkpoint.modelinfo import model_rows
from studyctl.definition.checkpoint.points import Point
from studyctl.definition.inputs.catalog import ARCHITECTURE_DEFAULTS, CATALOG, MLPERF_SHAPES, lookup
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.sweep import parse_sweep
from studyctl.errors import UserError

GIB = 1 << 30


@pytest.mark.parametrize(("name", "real"), [("gpt2-125m", 124_439_808), ("gpt2-1.5b", 1_557_611_200)])
def test_gpt2_has_its_real_parameter_count(name: str, real: int) -> None:
    assert abs(num_parameters(lookup(name)) - real) / real < 0.001


def test_gpt2_with_dlio_defaults_is_what_dlio_would_count() -> None:
    """Setting the architecture back to DLIO's defaults gives DLIO's (too large) formula, term by term."""
    m = replace(lookup("gpt2-125m"), **ARCHITECTURE_DEFAULTS)
    h, f, v, n = 768, 3072, 50257, 12
    per_layer = h + h * (h + 2 * h) + h * h + h + 2 * f * h + f * h
    assert num_parameters(m) == v * h + n * per_layer + h + v * h
    assert num_parameters(m) > 1.37 * num_parameters(lookup("gpt2-125m"))


def test_dlio_models_keep_dlio_defaults() -> None:
    for name in ("llama_7b", "llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t", "llama-3.1-70b-proxy"):
        assert CATALOG[name].dlio_compatible, name


def test_llama3_1t_head_size_is_truncated_and_feasible() -> None:
    m = lookup("llama3-1t")
    assert m.head_size == 25872 // 192 == 134 and m.head_size_truncated
    assert layout_problems(m, 1024, 8, 64, 1) == []
    s = summarize(m, Parallelism(8, 64, 2, 1))
    assert round(s.total_bytes / GIB, 2) == 15426.59


def test_llama31_70b_proxy_has_the_70b_layer_shape() -> None:
    proxy, full = lookup("llama-3.1-70b-proxy"), replace(lookup("llama3-70b"), num_attention_heads=64)
    assert (proxy.hidden_size, proxy.ffn_hidden_size, proxy.num_kv_heads, proxy.vocab_size) == (8192, 28672, 8, 128256)
    assert proxy.num_attention_heads == 64 and proxy.num_layers < 80
    per_layer = (num_parameters(full) - num_parameters(replace(full, num_layers=0))) // 80
    assert num_parameters(proxy) == num_parameters(replace(full, num_layers=0)) + proxy.num_layers * per_layer


def test_inline_model_from_a_base_changes_only_what_it_names() -> None:
    sweep = parse_sweep({"study": "s", "models": [{"name": "proxy16", "base": "llama-3.1-70b-proxy", "num_layers": 16}],
                         "filesystems": {"a": {"path": "/tmp/a"}}, "ceilings": "off"}, Path("s.yaml"))
    (point,) = expand(sweep)
    assert point.point.model == replace(lookup("llama-3.1-70b-proxy"), name="proxy16", num_layers=16)


def test_inline_model_architecture_settings_and_bad_base() -> None:
    data = {"study": "s", "filesystems": {"a": {"path": "/tmp/a"}},
            "models": [{"name": "g", "num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 256,
                        "num_attention_heads": 4, "vocab_size": 100, "mlp": "plain", "tied_embeddings": True,
                        "biases": True, "position_embeddings": 32}]}
    spec = parse_sweep(data, Path("s.yaml")).model_specs()["g"]
    assert (spec.mlp, spec.tied_embeddings, spec.biases, spec.position_embeddings) == ("plain", True, True, 32)
    data["models"] = [{"name": "x", "base": "llama_7bb"}]
    with pytest.raises(UserError, match="did you mean 'llama_7b'"):
        parse_sweep(data, Path("s.yaml"))


def test_point_ids_ignore_settings_at_their_old_defaults() -> None:
    """Existing studies keep their point ids: new settings at their defaults are not part of the identity."""
    point = Point(model=lookup("llama_7b"), zero_stage=1, filesystem="a")
    assert "mlp" not in point.canonical_json() and "naming" not in point.canonical_json()
    changed = point.model_copy(update={"checkpoint": point.checkpoint.model_copy(update={"naming": "deepspeed"})})
    assert changed.point_id != point.point_id


def test_tied_output_layer_is_not_written_twice() -> None:
    gpt2 = lookup("gpt2-125m")
    untied = replace(gpt2, tied_embeddings=False)
    diff = summarize(untied, Parallelism(1, 1, 1, 0)).model_bytes - summarize(gpt2, Parallelism(1, 1, 1, 0)).model_bytes
    assert diff == gpt2.vocab_size * gpt2.hidden_size * gpt2.model_bytes_per_param


def test_models_rows_name_sizes_dlio_differences_and_mlperf_counts() -> None:
    rows = {r["model"]: r for r in model_rows()}
    assert set(rows) == set(CATALOG)
    assert rows["llama3-8b"]["mlperf_processes"] == MLPERF_SHAPES["llama3-8b"][0] == 8
    assert rows["llama_7b"]["bytes_per_parameter"] == 14 and rows["llama_7b"]["dlio_checkpoint_bytes"] is None
    assert rows["gpt2-125m"]["dlio_checkpoint_bytes"] > rows["gpt2-125m"]["checkpoint_bytes"]
    assert "truncated" in rows["llama3-1t"]["note"] and "layers" in rows["llama-3.1-70b-proxy"]["note"]


def test_dlio_over_reports_zero2_by_the_other_replicas_weights() -> None:
    m, par = lookup("llama_7b"), Parallelism(1, 1, 8, 2)
    lay = summarize(m, par)
    assert dlio_reported_bytes(m, par) == lay.total_bytes + 7 * lay.model_bytes
    assert dlio_reported_bytes(m, Parallelism(1, 1, 8, 1)) == summarize(m, Parallelism(1, 1, 8, 1)).total_bytes


def test_llama_scaling_sweep_runs_llama3_1t_and_has_no_infeasible_points(monkeypatch: pytest.MonkeyPatch) -> None:
    from studyctl.definition.planning.expand import ExclusionKind
    from studyctl.definition.planning.sweep import load_sweep

    monkeypatch.setenv("USER", "tester")  # its paths name $USER
    points = expand(load_sweep(Path(__file__).resolve().parents[2] / "sweeps" / "llama-scaling.yaml"))
    one_t = [p for p in points if p.point.model.name == "llama3-1t" and not p.excluded]
    assert {p.point.nodes for p in one_t} == {64, 128}
    assert not [p for p in points if p.exclusion and p.exclusion.kind is ExclusionKind.INFEASIBLE]
