"""Packing trajectories into the batch the trainer runs on (`roll.algo.batch.PackedBatch`): chunks of many
trajectories in one padding-free token stream."""

from __future__ import annotations

from typing import Any

import torch

from roll.algo.batch import FIELD_DTYPES, PackedBatch
from roll.types import Trajectory


def pack_trajectories(trajectories: list[Trajectory]) -> PackedBatch:
    """Pack trajectories into one padding-free token stream.

    A chunk continues the current sequence when its context starts with everything the sequence holds so
    far (previous context + output); the rest of its context is the new observation. Otherwise it starts a
    new sequence with its full context.
    """
    if not trajectories:
        raise ValueError("cannot pack an empty list of trajectories; pass at least one Trajectory")
    tokens: list[int] = []
    positions: list[int] = []
    loss: list[bool] = []
    chunk_of: list[int] = []
    mu: list[float] = []
    seq_lens: list[int] = []
    seq_traj: list[int] = []
    chunk_cols: dict[str, list[Any]] = {name: [] for name in _CHUNK_COLUMNS}
    groups: dict[str, int] = {}
    chunk_id = 0
    for traj_id, traj in enumerate(trajectories):
        group = groups.setdefault(traj.group_id, len(groups))
        current: list[int] = []
        for k, chunk in enumerate(traj.chunks, start=1):
            ctx = chunk.context_ids
            continues = bool(current) and len(ctx) >= len(current) and ctx[: len(current)] == current
            if continues:
                new_context = ctx[len(current) :]
            else:
                if current:
                    seq_lens.append(len(current))
                    seq_traj.append(traj_id)
                current = []
                new_context = ctx
            start = len(current)
            current.extend(new_context)
            current.extend(chunk.output_ids)
            tokens.extend(new_context)
            tokens.extend(chunk.output_ids)
            positions.extend(range(start, len(current)))
            n_out = len(chunk.output_ids)
            loss.extend([False] * len(new_context) + [True] * n_out)
            chunk_of.extend([-1] * len(new_context) + [chunk_id] * n_out)
            mu.extend([0.0] * len(new_context) + list(chunk.output_logprobs or [0.0] * n_out))
            row = {
                "chunk_traj": traj_id,
                "chunk_pos": k,
                "chunk_count": len(traj.chunks),
                "chunk_reward": traj.reward,
                "chunk_group": group,
                "chunk_version": chunk.weight_version,
                "chunk_error": chunk.error,
                "chunk_relevant": chunk.relevant,
                "chunk_expert": chunk.expert,
                "chunk_truncated": chunk.truncated,
                "chunk_has_engine_logprobs": chunk.output_logprobs is not None,
            }
            for name, value in row.items():
                chunk_cols[name].append(value)
            chunk_id += 1
        seq_lens.append(len(current))
        seq_traj.append(traj_id)
    columns = {name: torch.tensor(values, dtype=FIELD_DTYPES[name]) for name, values in chunk_cols.items()}
    return PackedBatch(
        input_ids=torch.tensor(tokens, dtype=torch.long),
        position_ids=torch.tensor(positions, dtype=torch.long),
        loss_mask=torch.tensor(loss, dtype=torch.bool),
        chunk_index=torch.tensor(chunk_of, dtype=torch.long),
        engine_logprobs=torch.tensor(mu, dtype=torch.float32),
        seq_lens=torch.tensor(seq_lens, dtype=torch.long),
        seq_traj=torch.tensor(seq_traj, dtype=torch.long),
        **columns,
    )


_CHUNK_COLUMNS = (
    "chunk_traj",
    "chunk_pos",
    "chunk_count",
    "chunk_reward",
    "chunk_group",
    "chunk_version",
    "chunk_error",
    "chunk_relevant",
    "chunk_expert",
    "chunk_truncated",
    "chunk_has_engine_logprobs",
)
