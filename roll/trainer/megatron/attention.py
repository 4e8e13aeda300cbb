"""Core attention for packed rows in megatron-core's local layer spec.

A packed micro-batch is one row of many sequences, described by megatron-core's `PackedSeqParams` in the THD
layout (cumulative sequence lengths); RoPE then restarts its positions at every sequence, as in the Hugging
Face model. megatron-core's own local attention takes only a dense mask, so it would cost (sum len_i)^2
memory per head plus a [T, T] mask; this module attends within each sequence with torch's
`scaled_dot_product_attention` (flash or memory-efficient kernels on CUDA), sum(len_i^2) at most.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from megatron.core.packed_seq_params import PackedSeqParams
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.transformer_config import TransformerConfig


class PackedSequenceAttention(MegatronModule):
    """Causal attention within each packed sequence; q [T, heads, d], k/v [T, groups, d] -> [T, heads * d]."""

    def __init__(
        self,
        config: TransformerConfig,
        layer_number: int,
        attn_mask_type: Any,
        attention_type: str,
        attention_dropout: float | None = None,
        softmax_scale: float | None = None,
        cp_comm_type: str | None = None,
        pg_collection: Any = None,
    ) -> None:
        super().__init__(config=config)
        if config.context_parallel_size > 1:
            raise ValueError("packed-sequence attention does not split sequences over context parallel ranks")
        self.scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(config.kv_channels)
        self.dropout = config.attention_dropout if attention_dropout is None else attention_dropout

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        attn_mask_type: Any = None,
        attention_bias: torch.Tensor | None = None,
        packed_seq_params: PackedSeqParams | None = None,
    ) -> torch.Tensor:
        if packed_seq_params is None or packed_seq_params.qkv_format != "thd":
            raise ValueError(
                "PackedSequenceAttention needs packed_seq_params in the thd layout; build the inputs with "
                "roll.trainer.megatron.forward.packed_inputs"
            )
        lengths = packed_seq_params.cu_seqlens_q.diff().tolist()
        dropout = self.dropout if self.training else 0.0
        parts = []
        for q, k, v in zip(query.split(lengths), key.split(lengths), value.split(lengths), strict=True):
            # [s, heads, d] -> [1, heads, s, d]; grouped-query heads are expanded by the kernel
            out = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None],
                k.transpose(0, 1)[None],
                v.transpose(0, 1)[None],
                dropout_p=dropout,
                is_causal=True,
                scale=self.scale,
                enable_gqa=True,
            )
            parts.append(out[0].transpose(0, 1))
        out = torch.cat(parts)
        return out.reshape(out.shape[0], -1)
