"""A packed row's common start, computed once.

The sequences of a micro-batch often start alike: every agent episode's first prompt opens with the same
system prompt and tool schemas, and the episodes of one group share their whole first prompt (in the main
job's episodes, the first prompt is about two thirds of an episode's tokens). The row is rewritten as that
prefix once, followed by each sequence's remainder after it; a remainder attends to the prefix's keys and
values and causally to itself, which is the attention it had in the full row. The hidden state of every
original position is then gathered from the shortened row, so the logprobs are the full row's, and in
backward the gradients of every sequence that reads the prefix add up in it, as they would in the full row.
The forward and backward cost the shortened row's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

SHARED_PREFIX = "roll_shared_prefix"  # attention kwarg: the row's first segment is a prefix every other reads


@dataclass
class SharedRow:
    """A packed row with its common prefix stored once.

    Segment 0 is the prefix; segment i > 0 is sequence i - 1 after the prefix. `gather[t]` is the position in
    this row that computes original position t.
    """

    input_ids: torch.Tensor  # [T'] long
    position_ids: torch.Tensor  # [T'] long
    seq_lens: torch.Tensor  # [S + 1] long: the prefix, then each sequence's remainder
    prefix: int
    gather: torch.Tensor  # [T] long


def common_start(input_ids: torch.Tensor, position_ids: torch.Tensor, seq_lens: torch.Tensor) -> int:
    """Length of the longest start all sequences of a packed row share (the same tokens at the same
    positions), short of each sequence's last token; 0 with fewer than two sequences."""
    lengths = seq_lens.tolist()
    if len(lengths) < 2:
        return 0
    prefix = min(lengths) - 1
    first_ids, first_pos = input_ids[:prefix], position_ids[:prefix]
    for start in torch.tensor(lengths[:-1]).cumsum(0).tolist():
        same = (input_ids[start : start + prefix] == first_ids) & (
            position_ids[start : start + prefix] == first_pos
        )
        differ = (~same).nonzero()
        if differ.numel():
            prefix = int(differ[0, 0])
            first_ids, first_pos = first_ids[:prefix], first_pos[:prefix]
    return prefix


def share_prefix(
    input_ids: torch.Tensor, position_ids: torch.Tensor, seq_lens: torch.Tensor, min_prefix: int
) -> SharedRow | None:
    """The row with its common start (`common_start`) stored once; None when that start is shorter than
    `min_prefix` tokens, or empty, or `min_prefix` is 0 (sharing off)."""
    prefix = common_start(input_ids, position_ids, seq_lens) if min_prefix > 0 else 0
    if prefix < max(min_prefix, 1):
        return None
    lengths = seq_lens.tolist()
    starts = [0, *torch.tensor(lengths[:-1]).cumsum(0).tolist()]
    remainders = [(start + prefix, start + length) for start, length in zip(starts, lengths, strict=True)]
    ids = torch.cat([input_ids[:prefix], *(input_ids[a:b] for a, b in remainders)])
    positions = torch.cat([position_ids[:prefix], *(position_ids[a:b] for a, b in remainders)])
    gather, offset = [], prefix
    for length in lengths:
        gather += [torch.arange(prefix), torch.arange(offset, offset + length - prefix)]
        offset += length - prefix
    return SharedRow(
        input_ids=ids,
        position_ids=positions,
        seq_lens=torch.tensor([prefix, *(length - prefix for length in lengths)]),
        prefix=prefix,
        gather=torch.cat(gather),
    )


def shared_tokens(
    input_ids: torch.Tensor, position_ids: torch.Tensor, seq_lens: torch.Tensor, min_prefix: int
) -> int:
    """Tokens `share_prefix` saves on this row: the common start once for every sequence but the first."""
    prefix = common_start(input_ids, position_ids, seq_lens) if min_prefix > 0 else 0
    return prefix * (seq_lens.numel() - 1) if prefix >= max(min_prefix, 1) else 0


def prefix_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, lengths: list[int], scale: float | None
) -> torch.Tensor:
    """Attention over a shared row: q/k/v [1, heads, T', dim] (kv heads already repeated), segments of
    `lengths` (the prefix first). The prefix is causal on itself; every other segment reads all of the prefix
    and itself causally. Returns [1, heads, T', dim]."""
    queries, keys, values = (t.split(lengths, dim=2) for t in (query, key, value))
    prefix = lengths[0]
    parts = [
        torch.nn.functional.scaled_dot_product_attention(
            queries[0], keys[0], values[0], is_causal=True, scale=scale
        )
    ]
    for q, k, v in zip(queries[1:], keys[1:], values[1:], strict=True):
        length = q.shape[2]
        visible = torch.ones(length, prefix + length, dtype=torch.bool, device=q.device)
        visible[:, prefix:] = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        parts.append(
            torch.nn.functional.scaled_dot_product_attention(
                q,
                torch.cat([keys[0], k], dim=2),
                torch.cat([values[0], v], dim=2),
                attn_mask=visible,
                scale=scale,
            )
        )
    return torch.cat(parts, dim=2)
