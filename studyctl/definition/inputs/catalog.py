"""The model catalog: the single source of truth for model dimensions.

Dimensions and default parallelism follow DLIO's LLM-checkpointing workloads
(docs/checkpoint-model.md, with its source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

DTYPE_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "fp8": 1}


MlpKind = Literal["gated", "plain"]
# Architecture settings added after DLIO's catalog, with the defaults that keep DLIO's models byte-exact;
# a point's id leaves them out while they hold these values, so existing studies keep their ids.
ARCHITECTURE_DEFAULTS: dict[str, object] = {"mlp": "gated", "tied_embeddings": False, "biases": False,
                                            "position_embeddings": 0}


@dataclass(frozen=True)
class ModelSpec:
    """Transformer dimensions with DLIO's key names; dtypes set bytes per element.

    Architecture: `mlp` gated (SwiGLU: up, gate, down; DLIO's formula) or plain (GPT-2/GPT-3: up, down);
    `tied_embeddings` (the output layer reuses the input embedding: not written twice); `biases` (every
    linear layer and norm has one); `position_embeddings` (learned, this many positions; 0: none).
    The head size is hidden_size // num_attention_heads, truncated as DLIO truncates it.
    """

    name: str
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    vocab_size: int
    model_dtype: str = "bf16"
    optimizer_dtype: str = "fp32"
    mlp: MlpKind = "gated"
    tied_embeddings: bool = False
    biases: bool = False
    position_embeddings: int = 0

    @property
    def model_bytes_per_param(self) -> int:
        return DTYPE_BYTES[self.model_dtype]

    @property
    def optimizer_bytes_per_param(self) -> int:
        return DTYPE_BYTES[self.optimizer_dtype]

    @property
    def head_size(self) -> int:
        """DLIO's `hidden_size // num_attention_heads`: truncated when not whole (llama3-1t: 25872 / 192)."""
        return self.hidden_size // self.num_attention_heads

    @property
    def head_size_truncated(self) -> bool:
        return self.hidden_size % self.num_attention_heads != 0

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) under grouped-query attention."""
        return self.head_size * self.num_kv_heads

    @property
    def dlio_compatible(self) -> bool:
        """DLIO's formula describes this model (its architecture settings are DLIO's)."""
        return all(getattr(self, k) == v for k, v in ARCHITECTURE_DEFAULTS.items())

    def problems(self) -> list[str]:
        """Reasons this spec cannot describe a real model (empty when fine)."""
        out = [f"{key} must be >= 1" for key in DIMENSIONS if getattr(self, key) < 1]
        if self.position_embeddings < 0:
            out.append("position_embeddings must be >= 0")
        if not out and self.num_kv_heads > self.num_attention_heads:
            out.append("num_kv_heads must be <= num_attention_heads")
        if not out and self.num_attention_heads > self.hidden_size:
            out.append("num_attention_heads must be <= hidden_size (a head needs at least one element)")
        for key in ("model_dtype", "optimizer_dtype"):
            if getattr(self, key) not in DTYPE_BYTES:
                out.append(f"{key} must be one of {', '.join(DTYPE_BYTES)}")
        if self.mlp not in get_args(MlpKind):
            out.append(f"mlp must be one of {', '.join(get_args(MlpKind))}")
        return out


DIMENSIONS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads", "vocab_size")
GPT2 = {"mlp": "plain", "tied_embeddings": True, "biases": True, "position_embeddings": 1024}
# Llama-3.1-70B's layer shape; the training-benchmark proxy names no depth, so we pick one (settable).
LLAMA31_70B_PROXY_LAYERS = 8

CATALOG: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("gpt2-125m", 12, 768, 3072, 12, 12, 50257, **GPT2),  # type: ignore[arg-type]
        ModelSpec("gpt2-1.5b", 48, 1600, 6400, 25, 25, 50257, **GPT2),  # type: ignore[arg-type]
        ModelSpec("llama_7b", 32, 4096, 11008, 32, 32, 32000),
        ModelSpec("llama3-8b", 32, 4096, 14336, 32, 8, 128256),
        ModelSpec("llama3-70b", 80, 8192, 28672, 128, 8, 128256),
        ModelSpec("llama-3.1-70b-proxy", LLAMA31_70B_PROXY_LAYERS, 8192, 28672, 64, 8, 128256),
        ModelSpec("llama3-405b", 126, 16384, 53248, 128, 8, 128256),
        ModelSpec("llama3-1t", 128, 25872, 98304, 192, 32, 128256),
    )
}
# What `studyctl models` says about a model beyond its numbers.
NOTES: dict[str, str] = {
    "gpt2-125m": "GPT-2 small, as the training benchmark runs it",
    "gpt2-1.5b": "GPT-2 XL, as the training benchmark runs it",
    "llama-3.1-70b-proxy": (f"Llama-3.1-70B's layer shape with {LLAMA31_70B_PROXY_LAYERS} of its 80 layers (the "
                            "seed gives no depth; set num_layers with an inline {base: llama-3.1-70b-proxy, ...})"),
    "llama3-1t": "head size 25872 // 192 = 134, truncated as DLIO does",
}
# DLIO's default layout per workload: (tensor_parallel, pipeline_parallel, zero_stage).
DLIO_DEFAULT_LAYOUT: dict[str, tuple[int, int, int]] = {
    "gpt2-125m": (1, 1, 1),
    "gpt2-1.5b": (1, 1, 1),
    "llama_7b": (1, 1, 1),
    "llama3-8b": (1, 1, 3),
    "llama3-70b": (8, 4, 1),
    "llama-3.1-70b-proxy": (1, 1, 3),
    "llama3-405b": (8, 32, 1),
    "llama3-1t": (8, 64, 1),
}
# MLPerf Storage v2.0 CLOSED checkpointing shapes: model → (processes, TP, PP, ZeRO).
MLPERF_SHAPES: dict[str, tuple[int, int, int, int]] = {
    "llama3-8b": (8, 1, 1, 3),
    "llama3-70b": (64, 8, 1, 3),
    "llama3-405b": (512, 8, 32, 1),
    "llama3-1t": (1024, 8, 64, 1),
}
# Names DLIO's workload files and the training benchmark use for the same models.
ALIASES: dict[str, str] = {"llama_70b": "llama3-70b", "llama_405b": "llama3-405b", "llama_1t": "llama3-1t",
                           "llama_8b": "llama3-8b", "llama3_8b": "llama3-8b", "llama3_70b": "llama3-70b",
                           "llama3_405b": "llama3-405b", "llama3_1t": "llama3-1t"}


def lookup(name: str) -> ModelSpec | None:
    """The catalog model called `name` (DLIO aliases accepted), or None."""
    return CATALOG.get(ALIASES.get(name, name))


def default_world_size(name: str) -> int:
    """Processes of the model's reference run: MLPerf's count where it names one, else DP 8 (2 with PP/TP)."""
    if name in MLPERF_SHAPES:
        return MLPERF_SHAPES[name][0]
    tp, pp, zero = DLIO_DEFAULT_LAYOUT.get(name, (1, 1, 1))
    return tp * pp * (8 if zero == 3 or tp * pp == 1 else 2)
