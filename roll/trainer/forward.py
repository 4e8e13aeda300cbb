"""Per-token logprobs of a micro-batch: padding-free packed forward, or the padded baseline.

Packed: one row, position ids restarting per sequence and no attention mask; transformers turns the position
ids into per-sequence attention (a block-diagonal mask for sdpa/eager, varlen kernels for flash attention).
Only the positions that predict a generated token go through the LM head.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from roll.types import PackedBatch


def _predictor_mask(target: torch.Tensor) -> torch.Tensor:
    """Positions whose logits predict a target token: the position just before each one."""
    source = torch.zeros_like(target)
    source[:-1] = target[1:]
    return source


def _token_stats(
    logits: torch.Tensor, targets: torch.Tensor, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    logp = torch.log_softmax(logits.float(), dim=-1)
    chosen = logp.gather(-1, targets[:, None])[:, 0]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(logp.exp() * logp).sum(-1)
    return chosen, entropy


def _scatter(mask: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.numel(), dtype=values.dtype, device=values.device).masked_scatter(mask, values)


def packed_logprobs(
    model: PreTrainedModel, batch: PackedBatch, device: torch.device, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [T] (and entropies [T]) of the batch's generated tokens, 0 elsewhere."""
    target = batch.loss_mask.to(device)
    ids = batch.input_ids.to(device)
    out = model(
        input_ids=ids[None],
        position_ids=batch.position_ids.to(device)[None],
        logits_to_keep=_predictor_mask(target)[None],
        use_cache=False,
    )
    logits = out.logits.reshape(-1, out.logits.shape[-1])
    chosen, entropy = _token_stats(logits, ids[target], with_entropy)
    return _scatter(target, chosen), None if entropy is None else _scatter(target, entropy)


def padded_logprobs(
    model: PreTrainedModel, batch: PackedBatch, device: torch.device, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Same result as `packed_logprobs`, with every sequence right-padded to the longest one."""
    lengths = batch.seq_lens.tolist()
    width = max(lengths)
    rows = len(lengths)
    valid = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    ids = torch.zeros(rows, width, dtype=torch.long)
    target = torch.zeros(rows, width, dtype=torch.bool)
    ids[valid] = batch.input_ids
    target[valid] = batch.loss_mask
    predictors = torch.zeros_like(target)
    predictors[:, :-1] = target[:, 1:]
    out = model(
        input_ids=ids.to(device),
        attention_mask=valid.to(device).long(),
        logits_to_keep=predictors.to(device),
        use_cache=False,
    )
    logits = out.logits.reshape(-1, out.logits.shape[-1])
    chosen, entropy = _token_stats(logits, ids.to(device)[target.to(device)], with_entropy)
    mask = batch.loss_mask.to(device)
    return _scatter(mask, chosen), None if entropy is None else _scatter(mask, entropy)
