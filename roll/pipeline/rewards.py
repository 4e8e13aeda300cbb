"""Reward normalisation options, applied to a train batch before the loss sees it."""

from __future__ import annotations

import statistics

from roll.pipeline.config import RewardConfig
from roll.types import Trajectory


def normalize_rewards(trajectories: list[Trajectory], config: RewardConfig) -> list[Trajectory]:
    """New trajectories whose reward is normalised as configured (the env reward stays in metadata)."""
    if config.normalization == "none":
        return trajectories
    rewards = [t.reward for t in trajectories]
    if config.normalization == "batch_std":
        mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
        normalised = [(r - mean) / (std + config.eps) for r in rewards]
    else:
        groups: dict[str, list[float]] = {}
        for t in trajectories:
            groups.setdefault(t.group_id, []).append(t.reward)
        normalised = []
        for t in trajectories:
            members = groups[t.group_id]
            centred = t.reward - statistics.fmean(members)
            if config.normalization == "group_std":
                centred /= statistics.pstdev(members) + config.eps
            normalised.append(centred)
    return [
        t.model_copy(update={"reward": r, "metadata": {**t.metadata, "env_reward": t.reward}})
        for t, r in zip(trajectories, normalised, strict=True)
    ]
