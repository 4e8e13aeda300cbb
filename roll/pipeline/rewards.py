"""The rewards a train batch is trained on: the env's or the success indicator, normalised as configured."""

from __future__ import annotations

import statistics

from roll.pipeline.config import RewardConfig, RewardSource
from roll.types import Trajectory


def source_reward(trajectory: Trajectory, source: RewardSource) -> float:
    """A trajectory's reward from reward.source: the env's, or 1/0 for success."""
    if source == "env":
        return trajectory.reward
    if "success" not in trajectory.metadata:
        raise ValueError(
            f"reward.source is 'success' but the trajectory of {trajectory.task_id or 'a task'} records no "
            "success (its env manager does not report one): use reward.source: env"
        )
    return 1.0 if trajectory.metadata["success"] else 0.0


def train_rewards(trajectories: list[Trajectory], config: RewardConfig) -> list[Trajectory]:
    """New trajectories carrying the reward to train on (the env's reward stays in metadata)."""
    if config.source == "env" and config.normalization == "none":
        return trajectories
    rewards = [source_reward(t, config.source) for t in trajectories]
    if config.normalization == "none":
        normalised = rewards
    elif config.normalization == "batch_std":
        mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
        normalised = [(r - mean) / (std + config.eps) for r in rewards]
    else:
        groups: dict[str, list[float]] = {}
        for t, r in zip(trajectories, rewards, strict=True):
            groups.setdefault(t.group_id, []).append(r)
        normalised = []
        for t, r in zip(trajectories, rewards, strict=True):
            members = groups[t.group_id]
            centred = r - statistics.fmean(members)
            if config.normalization == "group_std":
                centred /= statistics.pstdev(members) + config.eps
            normalised.append(centred)
    return [
        t.model_copy(update={"reward": r, "metadata": {**t.metadata, "env_reward": t.reward}})
        for t, r in zip(trajectories, normalised, strict=True)
    ]
