"""The model catalog: the single source of truth for model dimensions.

Dimensions and default parallelism follow DLIO's LLM-checkpointing workloads
(see shared notes `checkpoint-model.md`).
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "fp8": 1}


@dataclass(frozen=True)
class ModelSpec:
    """Transformer dimensions with DLIO's key names; dtypes set bytes per element."""

    name: str
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    vocab_size: int
    model_dtype: str = "bf16"
    optimizer_dtype: str = "fp32"

    @property
    def model_bytes_per_param(self) -> int:
        return DTYPE_BYTES[self.model_dtype]

    @property
    def optimizer_bytes_per_param(self) -> int:
        return DTYPE_BYTES[self.optimizer_dtype]

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) under grouped-query attention."""
        return (self.hidden_size // self.num_attention_heads) * self.num_kv_heads

    def problems(self) -> list[str]:
        """Reasons this spec cannot describe a real model (empty when fine)."""
        out = []
        for key in (
            "num_layers",
            "hidden_size",
            "ffn_hidden_size",
            "num_attention_heads",
            "num_kv_heads",
            "vocab_size",
        ):
            if getattr(self, key) < 1:
                out.append(f"{key} must be >= 1")
        if not out:
            if self.num_kv_heads > self.num_attention_heads:
                out.append("num_kv_heads must be <= num_attention_heads")
            if self.hidden_size % self.num_attention_heads:
                out.append("hidden_size must be a multiple of num_attention_heads")
        for key in ("model_dtype", "optimizer_dtype"):
            if getattr(self, key) not in DTYPE_BYTES:
                out.append(f"{key} must be one of {', '.join(DTYPE_BYTES)}")
        return out


CATALOG: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("gpt2-125m", 12, 768, 3072, 12, 12, 50257),
        ModelSpec("gpt2-1.5b", 48, 1600, 6400, 25, 25, 50257),
        ModelSpec("llama_7b", 32, 4096, 11008, 32, 32, 32000),
        ModelSpec("llama3-8b", 32, 4096, 14336, 32, 8, 128256),
        ModelSpec("llama3-70b", 80, 8192, 28672, 128, 8, 128256),
        ModelSpec("llama3-405b", 126, 16384, 53248, 128, 8, 128256),
        ModelSpec("llama3-1t", 128, 25872, 98304, 192, 32, 128256),
    )
}
# DLIO's default layout per workload: (tensor_parallel, pipeline_parallel, zero_stage).
DLIO_DEFAULT_LAYOUT: dict[str, tuple[int, int, int]] = {
    "gpt2-125m": (1, 1, 1),
    "gpt2-1.5b": (1, 1, 1),
    "llama_7b": (1, 1, 1),
    "llama3-8b": (1, 1, 3),
    "llama3-70b": (8, 4, 1),
    "llama3-405b": (8, 32, 1),
    "llama3-1t": (8, 64, 1),
}
# Names DLIO's workload files use for the same models.
ALIASES: dict[str, str] = {"llama_70b": "llama3-70b", "llama_405b": "llama3-405b", "llama_1t": "llama3-1t",
                           "llama_8b": "llama3-8b", "llama3_8b": "llama3-8b"}


def lookup(name: str) -> ModelSpec | None:
    """The catalog model called `name` (DLIO aliases accepted), or None."""
    return CATALOG.get(ALIASES.get(name, name))
