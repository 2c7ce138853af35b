"""A model's parameter tensors (pure): its layers in DLIO's order, how the pipeline stages cut them, and the
tensors of each layer with whether tensor parallelism splits them. Every file size (`layout`) and every named
tensor (`engine_tensors`, `tensor_layout`, `reshard`) is derived from these.
"""

from __future__ import annotations

from studyctl.definition.inputs.catalog import ModelSpec


def stage_layers(num_layers: int, pp: int, stage: int) -> range:
    """Layer indices of a pipeline stage: 0 = embedding, 1..L transformer, L+1 head, L+2 norm."""
    nl, rem = divmod(num_layers, pp)
    start = stage * (nl + 1) + 1 if stage < rem else rem * (nl + 1) + (stage - rem) * nl + 1
    end = start + (nl + 1 if stage < rem else nl)  # exclusive
    if stage == 0:
        start = 0
    if stage == pp - 1:
        end = num_layers + 3
    return range(start, end)


def layer_tensors(m: ModelSpec, layer: int) -> list[tuple[int, bool]]:
    """(elements, split by TP) of each tensor of one layer index, DLIO's order; norms are replicated over TP,
    as are the biases of row-parallel layers (attention out, MLP down)."""
    h, f, v = m.hidden_size, m.ffn_hidden_size, m.vocab_size
    norm = [(h, False), (h, False)] if m.biases else [(h, False)]
    if layer == 0:
        return [(v * h, True)] + ([(m.position_embeddings * h, False)] if m.position_embeddings else [])
    if layer == m.num_layers + 1:  # output layer: none when it is the input embedding
        return [] if m.tied_embeddings else [(v * h, True)]
    if layer == m.num_layers + 2:  # final norm
        return norm
    qkv = h + 2 * m.kv_dim
    up = 2 * f if m.mlp == "gated" else f
    tensors = [*norm, (h * qkv, True), (h * h, True), *norm, (up * h, True), (f * h, True)]
    if m.biases:
        tensors += [(qkv, True), (h, False), (up, True), (h, False)]
    return tensors


def stage_parameters(m: ModelSpec, pipeline: int, stage: int) -> list[tuple[int, int]]:
    """(layer, index in layer) of every parameter tensor of a pipeline stage: each of its ranks holds a piece of
    every one (whole, its TP block, its ZeRO-3 shard), so each has an optimizer step for every one."""
    return [(layer, j) for layer in stage_layers(m.num_layers, pipeline, stage)
            for j in range(len(layer_tensors(m, layer)))]


def layer_elements(m: ModelSpec, layer: int, tp: int, shard: int) -> int:
    """Elements of one layer index held by one rank (tp split, then ZeRO-3 shard), DLIO's integer divisions."""
    return sum((n // tp if split else n) // shard for n, split in layer_tensors(m, layer))
