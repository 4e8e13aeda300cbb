"""Per-token logprobs of a micro-batch: padding-free packed forward, or the padded baseline.

Packed: one row, position ids restarting per sequence, and the sequence boundaries passed as varlen kwargs;
with the `roll_varlen` (or flash-attention) implementation each sequence attends only to itself, at
sum(len_i^2) cost. Padded: every sequence right-padded to the longest, with an attention mask.

Either way only the positions that predict a generated token go through the LM head, in row chunks whose
logits are recomputed in backward (activation checkpointing), so a [tokens, vocab] float32 tensor is never
kept alive: peak memory holds one chunk of logits.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedModel

from roll.algo.batch import PackedBatch
from roll.trainer.varlen_attention import sequence_boundaries

LOGIT_CHUNK_ROWS = 1024


def _predictor_mask(target: torch.Tensor) -> torch.Tensor:
    """Positions whose logits predict a target token: the one just before each (along the last dim)."""
    source = torch.zeros_like(target)
    source[..., :-1] = target[..., 1:]
    return source


def _final_hidden(model: PreTrainedModel, **inputs: Any) -> torch.Tensor:
    """The decoder's final (normed) hidden states, [rows, length, hidden].

    The model is called whole (not its decoder alone) so wrappers such as FSDP2 gather the root's weights; the
    LM head then runs on one position only and the hidden states are taken from the decoder's output.
    """
    captured: list[torch.Tensor] = []
    handle = model.get_decoder().register_forward_hook(
        lambda _module, _args, out: captured.append(out.last_hidden_state)
    )
    try:
        model(**inputs, logits_to_keep=1, use_cache=False)
    finally:
        handle.remove()
    return captured[0]


def _chunk_stats(
    head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    logp = torch.log_softmax(head(hidden).float(), dim=-1)
    chosen = logp.gather(-1, targets[:, None])[:, 0]
    if not with_entropy:
        return chosen, chosen.new_zeros(0)
    with torch.no_grad():
        entropy = -(logp.exp() * logp).sum(-1)
    return chosen, entropy


def _token_stats(
    model: PreTrainedModel, hidden: torch.Tensor, targets: torch.Tensor, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprob (and entropy) of each target from the hidden state that predicts it, chunk by chunk."""
    head = model.get_output_embeddings()
    chosen, entropy = [], []
    for h, t in zip(hidden.split(LOGIT_CHUNK_ROWS), targets.split(LOGIT_CHUNK_ROWS), strict=True):
        if torch.is_grad_enabled():
            c, e = checkpoint(_chunk_stats, head, h, t, with_entropy, use_reentrant=False)
        else:
            c, e = _chunk_stats(head, h, t, with_entropy)
        chosen.append(c)
        entropy.append(e)
    if not chosen:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty if with_entropy else None
    return torch.cat(chosen), torch.cat(entropy) if with_entropy else None


def _scatter(mask: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.numel(), dtype=values.dtype, device=values.device).masked_scatter(mask, values)


def packed_logprobs(
    model: PreTrainedModel, batch: PackedBatch, device: torch.device, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [T] (and entropies [T]) of the batch's generated tokens, 0 elsewhere."""
    target = batch.loss_mask.to(device)
    ids = batch.input_ids.to(device)
    hidden = _final_hidden(
        model,
        input_ids=ids[None],
        position_ids=batch.position_ids.to(device)[None],
        **sequence_boundaries(batch.seq_lens, device),
    )
    chosen, entropy = _token_stats(model, hidden[0][_predictor_mask(target)], ids[target], with_entropy)
    return _scatter(target, chosen), None if entropy is None else _scatter(target, entropy)


def padded_logprobs(
    model: PreTrainedModel, batch: PackedBatch, device: torch.device, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Same result as `packed_logprobs`, with every sequence right-padded to the longest one."""
    lengths = batch.seq_lens.tolist()
    width = max(lengths)
    valid = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    target = torch.zeros(len(lengths), width, dtype=torch.bool)
    ids[valid] = batch.input_ids
    target[valid] = batch.loss_mask
    ids, target = ids.to(device), target.to(device)
    hidden = _final_hidden(model, input_ids=ids, attention_mask=valid.to(device).long())
    chosen, entropy = _token_stats(model, hidden[_predictor_mask(target)], ids[target], with_entropy)
    mask = batch.loss_mask.to(device)
    return _scatter(mask, chosen), None if entropy is None else _scatter(mask, entropy)
