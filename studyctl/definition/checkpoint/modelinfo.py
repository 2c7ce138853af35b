"""What `studyctl models` says about each catalog model, computed from the catalog and the layout."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from studyctl.definition.checkpoint.layout import (
    OPTIMIZER_GROUPS,
    Parallelism,
    dlio_reported_bytes,
    num_parameters,
    summarize,
)
from studyctl.definition.inputs.catalog import (
    ARCHITECTURE_DEFAULTS,
    CATALOG,
    DLIO_DEFAULT_LAYOUT,
    MLPERF_SHAPES,
    NOTES,
    ModelSpec,
    default_world_size,
)


def bytes_per_parameter(m: ModelSpec) -> int:
    """Weights plus the optimizer's groups (fp32 master, Adam m, Adam v): 14 with DLIO's dtypes."""
    return m.model_bytes_per_param + OPTIMIZER_GROUPS * m.optimizer_bytes_per_param


def default_parallelism(name: str) -> Parallelism:
    tp, pp, zero = DLIO_DEFAULT_LAYOUT.get(name, (1, 1, 1))
    return Parallelism(tp, pp, default_world_size(name) // (tp * pp), zero)


def model_row(name: str, m: ModelSpec) -> dict[str, Any]:
    """One row: dimensions, parameters, bytes per parameter, size at the default layout, DLIO's size where
    it differs (ZeRO-2 over-count, or an architecture DLIO's formula does not describe), MLPerf's process count."""
    par = default_parallelism(name)
    size = summarize(m, par).total_bytes
    dlio = dlio_reported_bytes(m, par)
    return {
        "model": name,
        "num_layers": m.num_layers,
        "hidden_size": m.hidden_size,
        "ffn_hidden_size": m.ffn_hidden_size,
        "heads": f"{m.num_attention_heads}/{m.num_kv_heads}",
        "vocab_size": m.vocab_size,
        "architecture": ", ".join(_architecture(m)),
        "parameters": num_parameters(m),
        "bytes_per_parameter": bytes_per_parameter(m),
        "layout": f"TP{par.tensor} PP{par.pipeline} DP{par.data} ZeRO-{par.zero_stage}",
        "checkpoint_bytes": size,
        "dlio_checkpoint_bytes": dlio if dlio != size else None,
        "mlperf_processes": MLPERF_SHAPES[name][0] if name in MLPERF_SHAPES else None,
        "note": "; ".join(n for n in (NOTES.get(name, ""), _dlio_difference(m)) if n),
    }


def _dlio_difference(m: ModelSpec) -> str:
    if m.dlio_compatible:
        return ""
    dlio = num_parameters(replace(m, **ARCHITECTURE_DEFAULTS))  # type: ignore[arg-type]
    more = dlio / num_parameters(m) - 1
    return f"DLIO's formula (gated MLP, untied, no biases) would count {more:.0%} more parameters"


def _architecture(m: ModelSpec) -> list[str]:
    parts = [f"{m.mlp} MLP", "tied" if m.tied_embeddings else "untied"]
    if m.biases:
        parts.append("biases")
    if m.position_embeddings:
        parts.append(f"{m.position_embeddings} positions")
    return parts


def model_rows() -> list[dict[str, Any]]:
    return [model_row(name, m) for name, m in CATALOG.items()]
