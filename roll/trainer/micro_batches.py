"""Split a packed batch into micro-batches of whole trajectories within a token budget."""

from __future__ import annotations

from roll.algo.batch import PackedBatch
from roll.trainer.forward import shared_tokens


def plan_micro_batches(
    batch: PackedBatch, token_budget: int, padded: bool = False, shared_prefix: int = 0
) -> list[tuple[int, int]]:
    """Contiguous trajectory ranges [start, end) of at most `token_budget` tokens each, in data order.

    Packed, a micro-batch costs its real tokens, with every start of at least `shared_prefix` tokens that its
    sequences share counted once (when > 0: the forward computes it once); `padded`, it costs what the padded
    forward computes: its sequences times its longest sequence. Trajectories are never split (chunk- and
    trajectory-level quantities need all their tokens); one that alone exceeds the budget gets a micro-batch
    of its own.
    """
    tokens = batch.trajectory_token_counts().tolist()
    rows = [0] * batch.num_trajectories
    longest = [0] * batch.num_trajectories
    for traj, length in zip(batch.seq_traj.tolist(), batch.seq_lens.tolist(), strict=True):
        rows[traj] += 1
        longest[traj] = max(longest[traj], length)

    def cost(start: int, end: int) -> int:
        if padded:
            return sum(rows[start:end]) * max(longest[start:end])
        if not shared_prefix:
            return sum(tokens[start:end])
        part = batch.slice_trajectories(start, end)
        return sum(tokens[start:end]) - shared_tokens(
            part.input_ids, part.position_ids, part.seq_lens, shared_prefix
        )

    ranges: list[tuple[int, int]] = []
    start = 0
    for traj in range(batch.num_trajectories):
        if traj > start and cost(start, traj + 1) > token_budget:
            ranges.append((start, traj))
            start = traj
    if batch.num_trajectories:
        ranges.append((start, batch.num_trajectories))
    return ranges
