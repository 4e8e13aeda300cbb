"""Returns and advantages: chunk-level discounted returns, group baselines, token-level returns."""

from __future__ import annotations

import torch

from roll.algo.segments import segment_mean


def chunk_returns(
    reward: torch.Tensor, chunk_pos: torch.Tensor, chunk_count: torch.Tensor, gamma: float
) -> torch.Tensor:
    """G_k = gamma^(K-k) * R for every chunk (k is 1-based, K the trajectory's chunk count)."""
    exponent = (chunk_count - chunk_pos).to(reward.dtype)
    return torch.pow(torch.full_like(reward, gamma), exponent) * reward


def group_mean(values: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """For every entry, the mean of `values` over the entries of its group."""
    num_groups = int(group.max().item()) + 1
    return segment_mean(values, group, num_groups)[group]


def group_normalized(values: torch.Tensor, group: torch.Tensor, eps: float) -> torch.Tensor:
    """(x - mean_g) / (std_g + eps), std unbiased (n - 1); a group of one entry gets 0."""
    num_groups = int(group.max().item()) + 1
    mean = segment_mean(values, group, num_groups)
    centred = values - mean[group]
    counts = torch.bincount(group, minlength=num_groups).to(values.dtype)
    sq = values.new_zeros(num_groups).index_add(0, group, centred**2)
    std = torch.sqrt(sq / (counts - 1).clamp(min=1))
    out = centred / (std[group] + eps)
    return torch.where(counts[group] > 1, out, torch.zeros_like(out))


def trajectory_values(chunk_values: torch.Tensor, chunk_traj: torch.Tensor, num_traj: int) -> torch.Tensor:
    """Per-trajectory value from a per-chunk column that is constant within a trajectory (e.g. reward)."""
    out = chunk_values.new_zeros(num_traj)
    return out.index_copy(0, chunk_traj, chunk_values)


def token_returns(
    reward: torch.Tensor, token_traj: torch.Tensor, loss_mask: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Per generated token: gamma^(N-n) * R, n the token's 1-based index among its trajectory's N
    generated tokens (over all its chunks). `reward` is per trajectory; other tokens get 0."""
    out = torch.zeros(token_traj.numel(), dtype=reward.dtype)
    for traj in torch.unique(token_traj[loss_mask]).tolist():
        positions = ((token_traj == traj) & loss_mask).nonzero().flatten()
        n = positions.numel()
        exponent = torch.arange(n - 1, -1, -1, dtype=reward.dtype)
        out[positions] = torch.pow(torch.tensor(gamma, dtype=reward.dtype), exponent) * reward[traj]
    return out
