"""The engine's attention: decode steps read the prompt prefix all running rows share once, and prefill chunks
attend to their cached past without a mask.

Agent requests share a long start (system prompt and tool schemas). Decode attention is bound by memory
traffic, and with the prefix copied into every row each step would read its keys and values once per row.
The batch stores the shared prefix once; each layer attends to it with one matrix product over all rows'
queries, to the rows' own columns with a batched product, and takes one softmax over both (a common maximum
and one sum), which is the same attention as over the concatenated keys.

A prefill chunk of one prompt attends to all of its cached past and causally to itself. A masked attention
over [past, chunk] spends time on the mask; two flash passes (the past unmasked, with the query heads of a kv
head stacked so the past needs no repeating, and the chunk causal) merged by their log-sum-exps are the same
attention and ~15% faster.

The transformers model picks its attention function by `config._attn_implementation`; the engine switches its
model to `ATTENTION_NAME` only around its own passes: decode steps with a shared prefix, whose keys and
values they pass as a keyword argument, and prefill chunks, which pass `PREFILL_CHUNK`. Without either the
function is transformers' own sdpa, so the switch changes nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

ATTENTION_NAME = "roll_engine"
SHARED_PREFIX_KV = "roll_shared_prefix_kv"  # keyword argument: per layer (keys, values), [kv_heads, P, dim]
PREFILL_CHUNK = "roll_prefill_chunk"  # keyword argument: True in the pass over one prompt's next chunk

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def engine_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: object,
) -> tuple[torch.Tensor, None]:
    shared = kwargs.get(SHARED_PREFIX_KV)
    plain = kwargs.get("sliding_window") is not None or dropout > 0 or query.device.type != "cpu"
    if kwargs.get(PREFILL_CHUNK) and not plain and query.shape[0] == 1:
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        return _prefill_chunk_attention(query, key, value, scale), None
    if shared is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if query.shape[2] != 1 or kwargs.get("sliding_window") is not None or dropout > 0:
        raise ValueError(
            "shared-prefix attention serves decode steps (one query per row) of full attention without "
            "dropout; build the engine's batch without a shared prefix for this model"
        )
    prefix_keys, prefix_values = shared[module.layer_idx]  # type: ignore[index]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return _decode_with_shared_prefix(
        query, key, value, attention_mask, prefix_keys, prefix_values, scale
    ), None


def _prefill_chunk_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
) -> torch.Tensor:
    """Query [1, heads, chunk, dim] of a prompt's next chunk; keys, values [1, kv_heads, past + chunk, dim]"""
    _, heads, chunk, dim = query.shape
    kv_heads, past = key.shape[1], key.shape[2] - query.shape[2]
    groups = heads // kv_heads
    out, own_lse = _flash(
        query,
        key[:, :, past:].repeat_interleave(groups, dim=1),  # query head h reads kv head h // groups
        value[:, :, past:].repeat_interleave(groups, dim=1),
        0.0,
        True,
        scale=scale,
    )
    if past:
        stacked = query.reshape(1, kv_heads, groups * chunk, dim)
        past_out, past_lse = _flash(stacked, key[:, :, :past], value[:, :, :past], 0.0, False, scale=scale)
        past_lse = past_lse.reshape(1, heads, chunk)
        top = torch.maximum(own_lse, past_lse)
        own_weight, past_weight = (own_lse - top).exp_(), (past_lse - top).exp_()
        total = own_weight + past_weight
        out = out * (own_weight / total).unsqueeze(-1) + past_out.reshape(1, heads, chunk, dim) * (
            past_weight / total
        ).unsqueeze(-1)
    return out.transpose(1, 2).contiguous()


def _decode_with_shared_prefix(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    rows, heads, _, dim = query.shape
    kv_heads, own_length = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    # Query head h reads kv head h // groups (as transformers' repeat_kv lays them out).
    grouped = query.reshape(rows, kv_heads, groups, dim) * scale
    by_kv_head = grouped.transpose(0, 1).reshape(kv_heads, rows * groups, dim)
    prefix = torch.bmm(by_kv_head, prefix_keys.transpose(1, 2))  # [kv_heads, rows * groups, P]
    own = torch.bmm(
        grouped.reshape(rows * kv_heads, groups, dim),
        key.reshape(rows * kv_heads, own_length, dim).transpose(1, 2),
    ).view(rows, kv_heads, groups, own_length)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            own.masked_fill_(~attention_mask, float("-inf"))
        else:
            own.add_(attention_mask)
    # One softmax over [prefix, own] without concatenating them: a common maximum, exponentials, one sum.
    prefix_max = prefix.amax(-1, keepdim=True).view(kv_heads, rows, groups, 1).transpose(0, 1)
    top = torch.maximum(own.amax(-1, keepdim=True), prefix_max)
    own.sub_(top).exp_()
    prefix.sub_(top.transpose(0, 1).reshape(kv_heads, rows * groups, 1)).exp_()
    total = own.sum(-1, keepdim=True) + prefix.sum(-1, keepdim=True).view(
        kv_heads, rows, groups, 1
    ).transpose(0, 1)
    out = torch.bmm(
        own.view(rows * kv_heads, groups, own_length), value.reshape(rows * kv_heads, own_length, dim)
    ).view(rows, kv_heads, groups, dim)
    out += torch.bmm(prefix, prefix_values).view(kv_heads, rows, groups, dim).transpose(0, 1)
    out /= total
    return out.reshape(rows, 1, heads, dim)


AttentionInterface.register(ATTENTION_NAME, engine_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION_NAME, sdpa_mask)


@contextmanager
def engine_attention_on(model: PreTrainedModel) -> Iterator[None]:
    """Route `model`'s attention through `engine_attention` for the passes inside the block."""
    previous = model.config._attn_implementation
    model.config._attn_implementation = ATTENTION_NAME
    try:
        yield
    finally:
        model.config._attn_implementation = previous
