"""Per-token logprobs of a micro-batch: padding-free packed forward, or the padded baseline.

Packed: one row, position ids restarting per sequence, and the sequence boundaries passed as varlen kwargs
(`cu_seq_lens_q`, which transformers' flash-attention path also reads). With flash-attention 2 (CUDA) or
`roll_varlen`, registered here with transformers, each sequence attends only to itself, at sum(len_i^2)
cost, where a block-diagonal mask over the whole row would cost (sum len_i)^2 and materialise a [T, T] mask:
`roll_varlen` splits q/k/v at the boundaries and runs causal `scaled_dot_product_attention` per sequence.
Without boundaries (a plain or padded forward) it is transformers' sdpa attention, so a model switched to it
still generates and runs padded batches. Padded: every sequence right-padded to the longest, with an
attention mask.

Packed sequences often start alike: every agent episode's first prompt opens with the same system prompt and
tool schemas, and the episodes of one group share their whole first prompt (about two thirds of a main-job
episode's tokens). `share_prefixes` stores every start that sequences share once, as a tree of segments; a
segment attends to the segments above it whole and to itself causally, which is the attention its tokens had
in the full row. The hidden state of every original position is gathered from the shortened row, so the
logprobs are the full row's, and in backward the gradients of all sequences that read a shared segment add up
in it as they would in the full row; forward and backward cost the shortened row's tokens.

Either way only the positions that predict a generated token go through the LM head, in row chunks whose
logits are recomputed in backward (activation checkpointing), so a [tokens, vocab] float32 tensor is never
kept alive: peak memory holds one chunk of logits.
"""

from __future__ import annotations

from dataclasses import dataclass
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

LOGIT_CHUNK_ROWS = 1024
VARLEN = "roll_varlen"
SHARED_ROW = "roll_shared_row"  # attention kwarg: the SharedRow whose segments the packed row holds


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
    """Causal attention within each packed sequence, or over a SharedRow's segments; q/k/v are [1, heads, T,
    head_dim]."""
    shared = kwargs.get(SHARED_ROW)
    boundaries = kwargs.get("cu_seq_lens_q")
    if boundaries is None or attention_mask is not None or query.shape[0] != 1:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    if isinstance(shared, SharedRow):
        if dropout > 0:
            raise ValueError(
                "a packed row with shared starts cannot take attention dropout (a shared segment would drop "
                "the same weights for every sequence that reads it): set trainer.shared_prefix_tokens: 0"
            )
        return tree_attention(query, key, value, shared, scaling).transpose(1, 2).contiguous(), None
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


@dataclass
class SharedRow:
    """A packed row whose shared starts are stored once, as a tree of segments in depth-first order.

    A sequence is the path from a root segment to its own last segment; segment i reads the segments on the
    path above it (`ancestors[i]`, root first) and itself causally. `gather[t]` is the position in this row
    that computes original position t.
    """

    input_ids: torch.Tensor  # [T'] long
    position_ids: torch.Tensor  # [T'] long
    lengths: list[int]  # per segment
    ancestors: list[list[int]]  # per segment: the segments above it, root first
    gather: torch.Tensor  # [T] long


def share_prefixes(
    input_ids: torch.Tensor, position_ids: torch.Tensor, seq_lens: torch.Tensor, min_prefix: int
) -> SharedRow | None:
    """The row with every start that two or more of its sequences share (the same tokens at the same
    positions, at least `min_prefix` long) stored once; None when nothing is shared or `min_prefix` is 0.

    Shared starts nest: all of a batch's episodes share the system prompt, a group's episodes also the task.
    Every sequence keeps at least its last token in a segment of its own.
    """
    lengths = seq_lens.tolist()
    if min_prefix <= 0 or len(lengths) < 2:
        return None
    starts = [0, *torch.tensor(lengths[:-1]).cumsum(0).tolist()]
    keyed = input_ids * (int(position_ids.max()) + 1) + position_ids  # one number per (token, position)
    sequences = [keyed[s : s + n] for s, n in zip(starts, lengths, strict=True)]
    spans: list[tuple[int, int, int]] = []  # (sequence whose tokens it holds, begin, end)
    ancestors: list[list[int]] = []
    paths: list[list[int]] = [[] for _ in lengths]

    def add(owner: int, begin: int, end: int, above: list[int], members: list[int]) -> list[int]:
        spans.append((owner, begin, end))
        ancestors.append(above)
        for member in members:
            paths[member].append(len(spans) - 1)
        return [*above, len(spans) - 1]

    def split(members: list[int], depth: int, above: list[int]) -> None:
        if len(members) == 1:
            add(members[0], depth, lengths[members[0]], above, members)
            return
        first = sequences[members[0]]
        limit = min(lengths[m] for m in members) - 1
        common = limit
        for member in members[1:]:
            differ = (sequences[member][depth:limit] != first[depth:limit]).nonzero()
            if differ.numel():
                common = min(common, depth + int(differ[0, 0]))
        branches: dict[tuple[int, ...], list[int]] = {}
        if common - depth >= min_prefix:
            above = add(members[0], depth, common, above, members)
            depth = common
            for member in members:
                branches.setdefault((int(sequences[member][common]),), []).append(member)
        else:  # no start all of them share: the ones that share one of at least min_prefix tokens
            for member in members:
                if lengths[member] - 1 >= depth + min_prefix:
                    key = tuple(sequences[member][depth : depth + min_prefix].tolist())
                    branches.setdefault(key, []).append(member)
                else:
                    branches.setdefault((-1 - member,), []).append(member)
        for branch in branches.values():
            split(branch, depth, above)

    split(list(range(len(lengths))), 0, [])
    if len(spans) == len(lengths):
        return None
    offsets = torch.tensor([0, *(end - begin for _, begin, end in spans)]).cumsum(0).tolist()
    gather = torch.cat([torch.arange(offsets[node], offsets[node + 1]) for path in paths for node in path])
    pieces = [(starts[owner] + begin, starts[owner] + end) for owner, begin, end in spans]
    return SharedRow(
        input_ids=torch.cat([input_ids[a:b] for a, b in pieces]),
        position_ids=torch.cat([position_ids[a:b] for a, b in pieces]),
        lengths=[end - begin for _, begin, end in spans],
        ancestors=ancestors,
        gather=gather,
    )


def tree_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, row: SharedRow, scale: float | None
) -> torch.Tensor:
    """Attention over a shared row: q/k/v [1, heads, T', dim] (kv heads already repeated). Each segment
    reads the segments above it whole and itself causally. Returns [1, heads, T', dim]."""
    queries, keys, values = (t.split(row.lengths, dim=2) for t in (query, key, value))
    parts = []
    for node, q in enumerate(queries):
        above = row.ancestors[node]
        if not above:
            parts.append(
                F.scaled_dot_product_attention(q, keys[node], values[node], is_causal=True, scale=scale)
            )
            continue
        length, past = q.shape[2], sum(row.lengths[a] for a in above)
        visible = torch.ones(length, past + length, dtype=torch.bool, device=q.device)
        visible[:, past:] = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        k = torch.cat([*(keys[a] for a in above), keys[node]], dim=2)
        v = torch.cat([*(values[a] for a in above), values[node]], dim=2)
        parts.append(F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=scale))
    return torch.cat(parts, dim=2)


def shared_tokens(
    input_ids: torch.Tensor, position_ids: torch.Tensor, seq_lens: torch.Tensor, min_prefix: int
) -> int:
    """Tokens `share_prefixes` saves on this row (0 when it shares nothing)."""
    row = share_prefixes(input_ids, position_ids, seq_lens, min_prefix)
    return 0 if row is None else input_ids.numel() - row.input_ids.numel()


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

    Under `roll_varlen` attention, with `shared_prefix` > 0, every start of at least that many tokens that
    sequences share is computed once (`share_prefixes`): same logprobs and gradients, fewer tokens."""
    target = batch.loss_mask.to(device)
    ids = batch.input_ids.to(device)
    predictors = _predictor_mask(target).nonzero()[:, 0]
    shared = None
    if shared_prefix and model.config._attn_implementation == VARLEN:
        shared = share_prefixes(batch.input_ids, batch.position_ids, batch.seq_lens, shared_prefix)
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
            **sequence_boundaries(torch.tensor(shared.lengths), device),
            **{SHARED_ROW: shared},
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
