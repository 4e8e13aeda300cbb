"""Packed micro-batches as megatron-core GPT inputs, and per-token logprobs from its logits.

A packed micro-batch is one row right-padded to a common length; its sequences (the padding as one more)
are described by megatron-core's `PackedSeqParams` in the THD layout, which restarts RoPE positions per
sequence and lets `attention.PackedSequenceAttention` attend within each sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from roll.types import PackedBatch

if TYPE_CHECKING:
    from megatron.core.packed_seq_params import PackedSeqParams


@dataclass
class PackedInputs:
    input_ids: torch.Tensor  # [1, L] long
    position_ids: torch.Tensor  # [1, L] long, restarting per sequence
    packed_seq_params: PackedSeqParams


def padded_length(tokens: int, multiple: int) -> int:
    return -(-tokens // multiple) * multiple


def packed_inputs(batch: PackedBatch, length: int, device: torch.device) -> PackedInputs:
    """The micro-batch's tokens right-padded to `length`; the padding forms a sequence of its own."""
    from megatron.core.packed_seq_params import PackedSeqParams

    tokens = batch.num_tokens
    if length < tokens:
        raise ValueError(f"length {length} is shorter than the micro-batch's {tokens} tokens")
    lengths = batch.seq_lens.tolist() + ([length - tokens] if length > tokens else [])
    cu_seqlens = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu_seqlens[1:] = torch.tensor(lengths).cumsum(0)
    cu_seqlens = cu_seqlens.to(device)
    positions = torch.cat([torch.arange(n) for n in lengths])
    ids = torch.zeros(length, dtype=torch.long)
    ids[:tokens] = batch.input_ids
    longest = max(lengths)
    params = PackedSeqParams(
        qkv_format="thd",
        cu_seqlens_q=cu_seqlens,
        cu_seqlens_kv=cu_seqlens,
        max_seqlen_q=longest,
        max_seqlen_kv=longest,
    )
    return PackedInputs(
        input_ids=ids[None].to(device), position_ids=positions[None].to(device), packed_seq_params=params
    )


def token_logprobs(
    logits: torch.Tensor, batch: PackedBatch, vocab_size: int, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [T] (and entropies [T]) of the batch's generated tokens from logits [1, L, V_padded]; 0 off
    the loss mask. Padded vocabulary columns are dropped."""
    tokens = batch.num_tokens
    target = batch.loss_mask.to(logits.device)
    predictors = torch.zeros_like(target)
    predictors[:-1] = target[1:]
    rows = logits[0, :tokens][predictors, :vocab_size].float()
    logp = torch.log_softmax(rows, dim=-1)
    ids = batch.input_ids.to(logits.device)
    chosen = logp.gather(-1, ids[target][:, None])[:, 0]
    out = torch.zeros(tokens, dtype=chosen.dtype, device=logits.device).masked_scatter(target, chosen)
    if not with_entropy:
        return out, None
    with torch.no_grad():
        entropy = -(logp.exp() * logp).sum(-1)
    return out, torch.zeros(tokens, dtype=entropy.dtype, device=logits.device).masked_scatter(target, entropy)
