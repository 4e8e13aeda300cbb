"""Packed micro-batches as megatron-core GPT inputs, and per-token logprobs from its logits.

A packed micro-batch is one row right-padded to a common length; its sequences (the padding as one more)
are described by megatron-core's `PackedSeqParams` in the THD layout, which restarts RoPE positions per
sequence and lets `attention.PackedSequenceAttention` attend within each sequence. Under context
parallelism each rank gets its share of the row (`context_parallel.shard_for_rank`) and the logprobs are
gathered back into token order, so the loss sees the same [T] tensors as without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from roll.algo.batch import PackedBatch
from roll.trainer.megatron.context_parallel import ContextShard, gather_token_values, shard_for_rank

if TYPE_CHECKING:
    from megatron.core.packed_seq_params import PackedSeqParams


@dataclass
class PackedInputs:
    input_ids: torch.Tensor  # [1, L] long
    position_ids: torch.Tensor  # [1, L] long, restarting per sequence
    packed_seq_params: PackedSeqParams
    shard: ContextShard | None = None  # this rank's share under context parallelism


def padded_length(tokens: int, multiple: int) -> int:
    return -(-tokens // multiple) * multiple


def packed_inputs(
    batch: PackedBatch,
    length: int,
    device: torch.device,
    context_parallel_size: int = 1,
    context_parallel_rank: int = 0,
) -> PackedInputs:
    """The micro-batch's tokens right-padded to `length`; the padding forms a sequence of its own. Under
    context parallelism, this rank's share of the row (`length` from `context_parallel.row_length`)."""
    from megatron.core.packed_seq_params import PackedSeqParams

    if context_parallel_size > 1:
        shard = shard_for_rank(
            batch.input_ids,
            batch.position_ids,
            batch.loss_mask,
            batch.seq_lens,
            length,
            context_parallel_size,
            context_parallel_rank,
        ).to(device)
        # Padding is part of each padded sequence (see context_parallel), so the padded bounds are the
        # attention's bounds as well; max_seqlen is the whole row's, which sizes the RoPE table.
        params = PackedSeqParams(
            qkv_format="thd",
            cu_seqlens_q=shard.cu_seqlens,
            cu_seqlens_kv=shard.cu_seqlens,
            cu_seqlens_q_padded=shard.cu_seqlens,
            cu_seqlens_kv_padded=shard.cu_seqlens,
            max_seqlen_q=shard.max_seqlen,
            max_seqlen_kv=shard.max_seqlen,
        )
        return PackedInputs(
            input_ids=shard.input_ids[None],
            position_ids=shard.position_ids[None],
            packed_seq_params=params,
            shard=shard,
        )
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


# Padded vocabulary columns (zero rows of the output layer) must not take probability mass.
_MASKED_LOGIT = -1e30


def token_logprobs(
    logits: torch.Tensor,
    batch: PackedBatch,
    vocab_size: int,
    with_entropy: bool,
    shard: ContextShard | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs [T] (and entropies [T]) of the batch's generated tokens, 0 off the loss mask, from this
    tensor parallel rank's vocabulary slice of the logits [1, L, V_padded / TP]: megatron-core's
    vocab-parallel cross entropy, so no rank holds [tokens, vocabulary] logits whole. Under context
    parallelism (`shard` given) the logits are this rank's share and the values are gathered over the CP
    group (collective)."""
    if shard is not None:
        return _context_parallel_logprobs(logits, batch, vocab_size, with_entropy, shard)
    tokens = batch.num_tokens
    target = batch.loss_mask.to(logits.device)
    predictors = torch.zeros_like(target)
    predictors[:-1] = target[1:]
    ids = batch.input_ids.to(logits.device)[target]
    chosen, entropy = _label_logprobs(logits[0, :tokens][predictors], ids, vocab_size, with_entropy)
    out = torch.zeros(tokens, dtype=chosen.dtype, device=logits.device).masked_scatter(target, chosen)
    if entropy is None:
        return out, None
    return out, torch.zeros(tokens, dtype=entropy.dtype, device=logits.device).masked_scatter(target, entropy)


def _context_parallel_logprobs(
    logits: torch.Tensor, batch: PackedBatch, vocab_size: int, with_entropy: bool, shard: ContextShard
) -> tuple[torch.Tensor, torch.Tensor | None]:
    mask = shard.label_mask
    chosen, entropy = _label_logprobs(logits[0][mask], shard.labels[mask], vocab_size, with_entropy)
    local = torch.zeros(mask.numel(), dtype=chosen.dtype, device=logits.device).masked_scatter(mask, chosen)
    loss_mask = batch.loss_mask.to(logits.device)
    out = gather_token_values(local, shard, loss_mask)
    if entropy is None:
        return out, None
    local_entropy = torch.zeros(mask.numel(), dtype=entropy.dtype, device=logits.device)
    return out, gather_token_values(local_entropy.masked_scatter(mask, entropy), shard, loss_mask)


def _label_logprobs(
    rows: torch.Tensor, labels: torch.Tensor, vocab_size: int, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(label) (and the entropy, detached) of each row of vocab-parallel logits [N, V_padded / TP]."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel import vocab_parallel_cross_entropy

    rows = rows.float()
    width = rows.shape[-1]
    first = ps.get_tensor_model_parallel_rank() * width
    padding = torch.arange(first, first + width, device=rows.device) >= vocab_size
    rows = rows.masked_fill(padding, _MASKED_LOGIT)
    entropy = _vocab_parallel_entropy(rows.detach()) if with_entropy else None
    # The cross entropy works in place on its input, so it runs after the entropy has read the rows.
    chosen = -vocab_parallel_cross_entropy(rows[:, None], labels[:, None])[:, 0]
    return chosen, entropy


@torch.no_grad()
def _vocab_parallel_entropy(rows: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(rows) over the whole vocabulary, rows split over tensor parallel ranks:
    H = log S - sum(e * x) / S with x = rows - max and e = exp(x), S = sum(e)."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    group = ps.get_tensor_model_parallel_group()
    peak = rows.max(-1).values
    dist.all_reduce(peak, op=dist.ReduceOp.MAX, group=group)
    shifted = rows - peak[:, None]
    exp = shifted.exp()
    total = exp.sum(-1)
    weighted = (exp * shifted).sum(-1)
    dist.all_reduce(total, group=group)
    dist.all_reduce(weighted, group=group)
    return total.log() - weighted / total
