"""Split a packed batch into micro-batches of whole trajectories within a token budget."""

from __future__ import annotations

from roll.types import PackedBatch


def plan_micro_batches(batch: PackedBatch, token_budget: int) -> list[tuple[int, int]]:
    """Contiguous trajectory ranges [start, end) of at most `token_budget` tokens each.

    Trajectories are never split (chunk- and trajectory-level quantities need all their tokens); one that
    alone exceeds the budget gets a micro-batch of its own.
    """
    ranges: list[tuple[int, int]] = []
    start, tokens = 0, 0
    for traj, count in enumerate(batch.trajectory_token_counts().tolist()):
        if traj > start and tokens + count > token_budget:
            ranges.append((start, traj))
            start, tokens = traj, 0
        tokens += count
    if batch.num_trajectories:
        ranges.append((start, batch.num_trajectories))
    return ranges
