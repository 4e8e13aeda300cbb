"""Context parallelism over packed rows: each rank's share of the tokens, and the logprobs gathered back.

Under context parallelism (CP) of size `cp` every rank of a CP group runs the same micro-batch on a share
of its tokens, and Transformer Engine's attention exchanges keys and values between the ranks. The share
is the one Transformer Engine's THD kernels expect (`thd_get_partitioned_indices`): every sequence of the
packed row is padded to a multiple of 2 x cp and cut into 2 x cp equal chunks, and rank r keeps chunks r
and 2 x cp - 1 - r, so every rank gets as much causal attention work. A rank's tokens are its two chunks
of the first sequence, then of the second, and so on; megatron-core's RoPE for THD rows places them at
their positions from the same padded sequence lengths.

The padding of a sequence is appended to it and counted in its length: causal attention never lets a real
token see the padding after it, so the real tokens' outputs are those of the unpadded sequence, and no
kernel has to treat padded THD rows (`cu_seqlens` and their `_padded` variants are the same).

The loss needs every token: a position predicts the next token, which may live on another rank, so the
labels are shifted before the split. After the forward, the per-position logprobs are all-gathered over
the CP group and put back in token order (`gather_token_values`); in backward each rank keeps the gradient
of its own positions, and megatron-core's CP-aware loss scaling and gradient reduction over data x context
parallel ranks then give the same update as without CP.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def sequence_multiple(context_parallel_size: int) -> int:
    """What every sequence of a row is padded to: 2 x cp chunks under CP, nothing without."""
    return 1 if context_parallel_size == 1 else 2 * context_parallel_size


def padded_seq_lens(seq_lens: torch.Tensor, context_parallel_size: int) -> torch.Tensor:
    multiple = sequence_multiple(context_parallel_size)
    return (seq_lens + multiple - 1) // multiple * multiple


def row_length(seq_lens: torch.Tensor, tensor_parallel_size: int, context_parallel_size: int) -> int:
    """Smallest packed row for these sequences: every sequence padded for CP, the row a multiple of
    2 x cp x tp so that the padding after the last sequence splits into CP chunks and each rank's share
    splits evenly over tensor parallel ranks (sequence parallelism)."""
    total = int(padded_seq_lens(seq_lens, context_parallel_size).sum())
    if context_parallel_size == 1:
        multiple = tensor_parallel_size
    else:
        multiple = 2 * context_parallel_size * tensor_parallel_size
    return -(-total // multiple) * multiple


def partition_index(padded_lens: torch.Tensor, context_parallel_size: int, rank: int) -> torch.Tensor:
    """Row positions of CP rank `rank`'s tokens, in its order: for every sequence (lengths multiples of
    2 x cp), chunk `rank` then chunk 2 x cp - 1 - rank."""
    chunks = 2 * context_parallel_size
    if bool((padded_lens % chunks).any()):
        raise ValueError(
            f"every sequence length must be a multiple of 2 x cp = {chunks}: {padded_lens.tolist()}"
        )
    parts = []
    start = 0
    for length in padded_lens.tolist():
        size = length // chunks
        for chunk in (rank, chunks - 1 - rank):
            parts.append(torch.arange(start + chunk * size, start + (chunk + 1) * size))
        start += length
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


@dataclass
class ContextShard:
    """One CP rank's share of a packed micro-batch and what maps its results back to token order."""

    input_ids: torch.Tensor  # [L / cp] long
    position_ids: torch.Tensor  # [L / cp] long, restarting per sequence (the padding continues them)
    labels: torch.Tensor  # [L / cp] long: the token each position predicts (0 where none)
    label_mask: torch.Tensor  # [L / cp] bool: the position predicts a loss token
    cu_seqlens: torch.Tensor  # [S + 2] or [S + 1] int32: padded sequence bounds of the whole row
    max_seqlen: int  # longest padded sequence of the whole row
    # [T]: for each token t > 0 of the micro-batch, the index in the CP-gathered [L] values of the position
    # that predicts it (t - 1); for t = 0, index 0 (masked out in `gather_token_values`)
    predictor_source: torch.Tensor

    def to(self, device: torch.device) -> ContextShard:
        return ContextShard(
            input_ids=self.input_ids.to(device),
            position_ids=self.position_ids.to(device),
            labels=self.labels.to(device),
            label_mask=self.label_mask.to(device),
            cu_seqlens=self.cu_seqlens.to(device),
            max_seqlen=self.max_seqlen,
            predictor_source=self.predictor_source.to(device),
        )


def shard_for_rank(
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    loss_mask: torch.Tensor,
    seq_lens: torch.Tensor,
    length: int,
    context_parallel_size: int,
    rank: int,
) -> ContextShard:
    """CP rank `rank`'s share of a packed micro-batch ([T] tensors, sequences of `seq_lens`) laid out in a
    row of `length` tokens (at least `row_length(seq_lens, tp, cp)`; the rest is one padding sequence)."""
    cp = context_parallel_size
    tokens = int(seq_lens.sum())
    if input_ids.numel() != tokens:
        raise ValueError(f"{input_ids.numel()} tokens but the sequence lengths sum to {tokens}")
    if bool(loss_mask[:1].any()):
        raise ValueError("the first token of a micro-batch cannot be a loss token: no position predicts it")
    padded = padded_seq_lens(seq_lens, cp)
    used = int(padded.sum())
    if length < used or (length - used) % sequence_multiple(cp):
        raise ValueError(
            f"row length {length} cannot hold sequences padded to {used} tokens in chunks of 2 x cp = "
            f"{sequence_multiple(cp)}; take the length from row_length"
        )
    lengths = padded.tolist() + ([length - used] if length > used else [])
    bounds = torch.zeros(len(lengths) + 1, dtype=torch.long)
    bounds[1:] = torch.tensor(lengths).cumsum(0)
    # row position of every token: its sequence's start in the row plus its offset in the sequence
    seq_starts = torch.repeat_interleave(bounds[: len(seq_lens)] - _starts(seq_lens), seq_lens)
    token_rows = torch.arange(tokens) + seq_starts
    row_ids = torch.zeros(length, dtype=torch.long)
    row_ids[token_rows] = input_ids
    row_positions = torch.cat([torch.arange(n) for n in lengths])
    row_labels = torch.zeros(length, dtype=torch.long)
    row_label_mask = torch.zeros(length, dtype=torch.bool)
    row_labels[token_rows[:-1]] = input_ids[1:]
    row_label_mask[token_rows[:-1]] = loss_mask[1:]
    lengths_tensor = torch.tensor(lengths)
    mine = partition_index(lengths_tensor, cp, rank)
    order = torch.cat([partition_index(lengths_tensor, cp, r) for r in range(cp)])
    gathered_at = torch.empty(length, dtype=torch.long)
    gathered_at[order] = torch.arange(length)  # row position -> index in the gathered values
    source = torch.zeros(tokens, dtype=torch.long)
    source[1:] = gathered_at[token_rows[:-1]]
    return ContextShard(
        input_ids=row_ids[mine],
        position_ids=row_positions[mine],
        labels=row_labels[mine],
        label_mask=row_label_mask[mine],
        cu_seqlens=bounds.to(torch.int32),
        max_seqlen=max(lengths),
        predictor_source=source,
    )


def _starts(seq_lens: torch.Tensor) -> torch.Tensor:
    starts = torch.zeros_like(seq_lens)
    starts[1:] = seq_lens.cumsum(0)[:-1]
    return starts


def gather_token_values(local: torch.Tensor, shard: ContextShard, loss_mask: torch.Tensor) -> torch.Tensor:
    """[T] values in token order (value of token t = that of the position predicting it, 0 off
    `loss_mask`) from every CP rank's [L / cp] per-position values. Collective over the CP group; in
    backward each rank keeps the gradient of its own positions."""
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel.mappings import gather_from_sequence_parallel_region

    gathered = gather_from_sequence_parallel_region(
        local, tensor_parallel_output_grad=False, group=ps.get_context_parallel_group()
    )
    return unshard_token_values(gathered, shard, loss_mask)


def unshard_token_values(
    gathered: torch.Tensor, shard: ContextShard, loss_mask: torch.Tensor
) -> torch.Tensor:
    """[T] values in token order from the CP ranks' per-position values concatenated in rank order."""
    values = gathered[shard.predictor_source]
    return torch.where(loss_mask.to(values.device), values, torch.zeros_like(values))
