"""Packed micro-batches as megatron-core GPT inputs, and per-token logprobs from its logits.

The local layer spec's attention takes an explicit mask, not packed-sequence metadata, so a packed
micro-batch is one row with a block-diagonal causal mask (True = masked). RoPE then sees positions 0..L-1 of
the row instead of positions restarting per sequence; attention scores under RoPE depend only on position
differences, and the mask keeps every query inside its own sequence, so the result is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from roll.types import PackedBatch


@dataclass
class PackedInputs:
    input_ids: torch.Tensor  # [1, L] long
    position_ids: torch.Tensor  # [1, L] long
    attention_mask: torch.Tensor  # [1, 1, L, L] bool, True = masked


def padded_length(tokens: int, multiple: int) -> int:
    return -(-tokens // multiple) * multiple


def packed_inputs(batch: PackedBatch, length: int, device: torch.device) -> PackedInputs:
    """The micro-batch's tokens right-padded to `length`; every padding token attends only to itself."""
    tokens = batch.num_tokens
    if length < tokens:
        raise ValueError(f"length {length} is shorter than the micro-batch's {tokens} tokens")
    num_seqs = int(batch.seq_lens.numel())
    segment = torch.cat(
        [
            torch.repeat_interleave(torch.arange(num_seqs), batch.seq_lens),
            torch.arange(num_seqs, num_seqs + length - tokens),
        ]
    )
    positions = torch.arange(length)
    mask = (segment[:, None] != segment[None, :]) | (positions[None, :] > positions[:, None])
    ids = torch.zeros(length, dtype=torch.long)
    ids[:tokens] = batch.input_ids
    return PackedInputs(
        input_ids=ids[None].to(device),
        position_ids=positions[None].to(device),
        attention_mask=mask[None, None].to(device),
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
