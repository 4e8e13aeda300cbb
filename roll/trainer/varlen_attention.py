"""Variable-length attention for the padding-free packed forward, registered with transformers.

A packed row holds many sequences; attending within each one costs sum(len_i^2), while a block-diagonal
mask over the whole row costs (sum len_i)^2 and materialises a [T, T] mask. `roll_varlen` splits q/k/v at the
sequence boundaries (`cu_seq_lens_q`, the kwarg transformers' flash-attention path also reads) and runs
causal `scaled_dot_product_attention` per sequence. Without those boundaries (a plain or padded forward) it
is transformers' sdpa attention, so a model switched to it still generates and runs padded batches.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.utils import is_flash_attn_2_available

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
