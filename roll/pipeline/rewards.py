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
    """New trajectories carrying the reward to train on (the env's reward stays in metadata).

    Without imitation_in_baseline, imitation fallbacks take no part in the statistics and get the mean
    normalised reward of the episodes their group played: their expert chunks train by NLL, so the only
    effect of their reward is on a group mean, which this leaves as the played episodes make it."""
    if config.source == "env" and config.normalization == "none" and config.imitation_in_baseline:
        return trajectories
    keep_all = config.imitation_in_baseline
    played = [i for i, t in enumerate(trajectories) if keep_all or not t.metadata.get("imitation")]
    scores = dict(zip(played, _normalised([trajectories[i] for i in played], config), strict=True))
    by_group: dict[str, list[float]] = {}
    for i in played:
        by_group.setdefault(trajectories[i].group_id, []).append(scores[i])
    rewards = [
        scores[i] if i in scores else statistics.fmean(by_group.get(t.group_id, [0.0]))
        for i, t in enumerate(trajectories)
    ]
    return [
        t.model_copy(update={"reward": r, "metadata": {**t.metadata, "env_reward": t.reward}})
        for t, r in zip(trajectories, rewards, strict=True)
    ]


def _normalised(trajectories: list[Trajectory], config: RewardConfig) -> list[float]:
    rewards = [source_reward(t, config.source) for t in trajectories]
    if config.normalization == "none" or not rewards:
        return rewards
    if config.normalization == "batch_std":
        mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
        return [(r - mean) / (std + config.eps) for r in rewards]
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
    return normalised
