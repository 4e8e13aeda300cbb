"""Per-token logprobs of a micro-batch: padding-free packed forward, or the padded baseline.

Packed: one row, position ids restarting per sequence, and the sequence boundaries passed as varlen kwargs
(`cu_seq_lens_q`, which transformers' flash-attention path also reads). With flash-attention 2 (CUDA) or
`roll_varlen`, registered here with transformers, each sequence attends only to itself, at sum(len_i^2)
cost, where a block-diagonal mask over the whole row would cost (sum len_i)^2 and materialise a [T, T] mask:
`roll_varlen` splits q/k/v at the boundaries and runs causal `scaled_dot_product_attention` per sequence.
Without boundaries (a plain or padded forward) it is transformers' sdpa attention, so a model switched to it
still generates and runs padded batches. Padded: every sequence right-padded to the longest, with an
attention mask.

Either way only the positions that predict a generated token go through the LM head, in row chunks whose
logits are recomputed in backward (activation checkpointing), so a [tokens, vocab] float32 tensor is never
kept alive: peak memory holds one chunk of logits.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.utils import is_flash_attn_2_available

from roll.algo.batch import PackedBatch
from roll.trainer.shared_prefix import SHARED_PREFIX, prefix_attention, share_prefix

LOGIT_CHUNK_ROWS = 1024
VARLEN = "roll_varlen"


def varlen_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Causal attention within each packed sequence; q/k/v are [1, heads, T, head_dim]."""
    boundaries = kwargs.get("cu_seq_lens_q")
    if boundaries is None or attention_mask is not None or query.shape[0] != 1:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    lengths = boundaries.diff().tolist()
    if kwargs.get(SHARED_PREFIX):
        return prefix_attention(query, key, value, lengths, scaling).transpose(1, 2).contiguous(), None
    parts = [
        F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, scale=scaling)
        for q, k, v in zip(
            query.split(lengths, dim=2), key.split(lengths, dim=2), value.split(lengths, dim=2), strict=True
        )
    ]
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


def _varlen_mask(*args: Any, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """No mask for packed or plain causal rows (the attention knows the boundaries); sdpa's for padding."""
    if attention_mask is None:
        return None
    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


AttentionInterface.register(VARLEN, varlen_attention_forward)
AttentionMaskInterface.register(VARLEN, _varlen_mask)


def use_varlen_attention(model: PreTrainedModel, device: torch.device) -> str:
    """Switch `model` to per-sequence attention for packed rows: flash-attention 2 on CUDA where it is
    installed, `roll_varlen` otherwise. Returns the implementation's name."""
    name = "flash_attention_2" if device.type == "cuda" and is_flash_attn_2_available() else VARLEN
    model.set_attn_implementation(name)
    return name


def sequence_boundaries(seq_lens: torch.Tensor, device: torch.device) -> dict[str, Any]:
    """The varlen kwargs of a packed row: cumulative sequence lengths and the longest sequence."""
    cu = torch.zeros(seq_lens.numel() + 1, dtype=torch.int32)
    cu[1:] = seq_lens.cumsum(0)
    cu = cu.to(device)
    longest = int(seq_lens.max())
    return {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest, "max_length_k": longest}


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
    model: PreTrainedModel,
    batch: PackedBatch,
    device: torch.device,
    with_entropy: bool = False,
    shared_prefix: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [T] (and entropies [T]) of the batch's generated tokens, 0 elsewhere.

    Under `roll_varlen` attention, with `shared_prefix` > 0, a start of at least that many tokens that every
    sequence shares is computed once (roll.trainer.shared_prefix): same logprobs and gradients, fewer
    tokens."""
    target = batch.loss_mask.to(device)
    ids = batch.input_ids.to(device)
    predictors = _predictor_mask(target).nonzero()[:, 0]
    shared = None
    if shared_prefix and model.config._attn_implementation == VARLEN:
        shared = share_prefix(batch.input_ids, batch.position_ids, batch.seq_lens, shared_prefix)
    if shared is None:
        hidden = _final_hidden(
            model,
            input_ids=ids[None],
            position_ids=batch.position_ids.to(device)[None],
            **sequence_boundaries(batch.seq_lens, device),
        )
    else:
        hidden = _final_hidden(
            model,
            input_ids=shared.input_ids.to(device)[None],
            position_ids=shared.position_ids.to(device)[None],
            **sequence_boundaries(shared.seq_lens, device),
            **{SHARED_PREFIX: True},
        )
        predictors = shared.gather.to(device)[predictors]
    chosen, entropy = _token_stats(model, hidden[0][predictors], ids[target], with_entropy)
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
