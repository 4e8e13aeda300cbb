"""The packed batch the losses and the trainer work on: chunks of many trajectories in one padding-free token
stream, as tensors (`roll.trainer.packing.pack_trajectories` makes one from trajectories).

It lives with the losses because they are its first reader: the maths defines which tensors a batch carries,
and the trainer, which packs and moves them, depends on it, not the other way round."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch


@dataclass
class PackedBatch:
    """Chunks of many trajectories concatenated into one token stream without padding.

    Token tensors have length T (all tokens), chunk tensors length C, sequence tensors length S.
    Position ids restart at 0 for every sequence. A trajectory's chunks share one sequence while each
    chunk's context is exactly the previous context + output + new observation. Trajectories are laid out
    contiguously and in order, so a contiguous range of trajectories is a contiguous range of tokens,
    chunks and sequences.
    """

    input_ids: torch.Tensor  # [T] long
    position_ids: torch.Tensor  # [T] long
    loss_mask: torch.Tensor  # [T] bool: generated tokens only
    chunk_index: torch.Tensor  # [T] long: chunk of each generated token, -1 elsewhere
    engine_logprobs: torch.Tensor  # [T] float: mu of generated tokens, 0 elsewhere
    seq_lens: torch.Tensor  # [S] long
    seq_traj: torch.Tensor  # [S] long: trajectory of each sequence
    chunk_traj: torch.Tensor  # [C] long: trajectory of each chunk
    chunk_pos: torch.Tensor  # [C] long: k, 1-based position of the chunk in its trajectory
    chunk_count: torch.Tensor  # [C] long: K, number of chunks of its trajectory
    chunk_reward: torch.Tensor  # [C] float: R of its trajectory
    chunk_group: torch.Tensor  # [C] long: group index (same group id -> same index)
    chunk_version: torch.Tensor  # [C] long: weight version
    chunk_error: torch.Tensor  # [C] bool
    chunk_relevant: torch.Tensor  # [C] bool
    chunk_expert: torch.Tensor  # [C] bool
    chunk_truncated: torch.Tensor  # [C] bool: cut at the token cap
    chunk_has_engine_logprobs: torch.Tensor  # [C] bool
    old_logprobs: torch.Tensor | None = None  # [T] pi_old, set by the trainer when it steps several times
    ref_logprobs: torch.Tensor | None = None  # [T] pi_ref, set by the trainer for a loss with a KL term
    chunk_advantage: torch.Tensor | None = None  # [C] set by a loss's prepare()
    token_advantage: torch.Tensor | None = None  # [T] set by token-level losses' prepare()
    norm: dict[str, float] = field(default_factory=dict)  # global normalisers set by prepare()

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.numel())

    @property
    def num_chunks(self) -> int:
        return int(self.chunk_traj.numel())

    @property
    def num_trajectories(self) -> int:
        return int(self.seq_traj.max().item()) + 1 if self.seq_traj.numel() else 0

    @property
    def num_loss_tokens(self) -> int:
        return int(self.loss_mask.sum().item())

    def chunk_lengths(self) -> torch.Tensor:
        """Number of generated tokens of each chunk, [C]."""
        idx = self.chunk_index[self.loss_mask]
        return torch.bincount(idx, minlength=self.num_chunks)

    def token_trajectory(self) -> torch.Tensor:
        """Trajectory of every token, [T]."""
        return torch.repeat_interleave(self.seq_traj, self.seq_lens)

    def trajectory_token_counts(self) -> torch.Tensor:
        """Tokens (all, not only generated) of each trajectory, [num_trajectories]."""
        counts = torch.zeros(self.num_trajectories, dtype=torch.long)
        return counts.index_add_(0, self.seq_traj, self.seq_lens)

    def slice_trajectories(self, start: int, end: int) -> PackedBatch:
        """The trajectories start..end-1 as a batch of their own (chunk and trajectory ids rebased)."""
        seq_sel = (self.seq_traj >= start) & (self.seq_traj < end)
        seq_ids = seq_sel.nonzero().flatten()
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), self.seq_lens.cumsum(0)])
        t0, t1 = int(offsets[seq_ids[0]]), int(offsets[seq_ids[-1] + 1])
        chunk_sel = (self.chunk_traj >= start) & (self.chunk_traj < end)
        chunk_ids = chunk_sel.nonzero().flatten()
        c0, c1 = int(chunk_ids[0]), int(chunk_ids[-1]) + 1
        values: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "norm":
                values[f.name] = dict(value)
            elif value is None:
                values[f.name] = None
            elif f.name.startswith("chunk_") and f.name != "chunk_index":
                values[f.name] = value[c0:c1]
            elif f.name.startswith("seq_"):
                values[f.name] = value[seq_ids[0] : seq_ids[-1] + 1]
            else:
                values[f.name] = value[t0:t1]
        values["chunk_index"] = torch.where(values["loss_mask"], values["chunk_index"] - c0, -1)
        values["seq_traj"] = values["seq_traj"] - start
        values["chunk_traj"] = values["chunk_traj"] - start
        return PackedBatch(**values)

    def with_updates(self, **changes: Any) -> PackedBatch:
        return replace(self, **changes)

    def to_json_dict(self) -> dict[str, Any]:
        """Plain lists and numbers, for crossing a process boundary as JSON."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.tolist() if isinstance(value, torch.Tensor) else value
        return out

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> PackedBatch:
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if f.name == "norm":
                values[f.name] = dict(value or {})
            elif value is None:
                values[f.name] = None
            else:
                values[f.name] = torch.tensor(value, dtype=FIELD_DTYPES[f.name])
        return cls(**values)


_FLOAT_FIELDS = {
    "engine_logprobs",
    "chunk_reward",
    "old_logprobs",
    "ref_logprobs",
    "chunk_advantage",
    "token_advantage",
}
_BOOL_FIELDS = {
    "loss_mask",
    "chunk_error",
    "chunk_relevant",
    "chunk_expert",
    "chunk_truncated",
    "chunk_has_engine_logprobs",
}
FIELD_DTYPES = {
    f.name: torch.float32 if f.name in _FLOAT_FIELDS else torch.bool if f.name in _BOOL_FIELDS else torch.long
    for f in fields(PackedBatch)
}
