"""Reward normalisation options, on numbers worked by hand."""

from __future__ import annotations

import pytest

from roll.pipeline.config import RewardConfig
from roll.pipeline.rewards import train_rewards
from roll.types import Chunk, Trajectory


def batch(rewards: list[tuple[str, float]]) -> list[Trajectory]:
    chunk = Chunk(context_ids=[1], output_ids=[2])
    return [Trajectory(chunks=[chunk], reward=r, group_id=g) for g, r in rewards]


REWARDS = [("a", 1.0), ("a", 0.0), ("b", -0.1), ("b", -0.1)]


def test_none_keeps_the_env_rewards() -> None:
    assert [t.reward for t in train_rewards(batch(REWARDS), RewardConfig())] == [1.0, 0.0, -0.1, -0.1]


def test_group_subtracts_the_group_mean_and_keeps_the_env_reward() -> None:
    out = train_rewards(batch(REWARDS), RewardConfig(normalization="group"))
    assert [t.reward for t in out] == pytest.approx([0.5, -0.5, 0.0, 0.0])
    assert [t.metadata["env_reward"] for t in out] == [1.0, 0.0, -0.1, -0.1]


def test_group_std_divides_by_the_group_std() -> None:
    out = train_rewards(batch(REWARDS), RewardConfig(normalization="group_std", eps=1e-9))
    assert [t.reward for t in out] == pytest.approx([1.0, -1.0, 0.0, 0.0], abs=1e-6)


def test_batch_std_z_scores_over_the_batch() -> None:
    out = train_rewards(batch(REWARDS), RewardConfig(normalization="batch_std", eps=1e-9))
    # mean 0.2, population std sqrt((0.8^2 + 0.2^2 + 2 * 0.3^2) / 4) = sqrt(0.215)
    std = 0.215**0.5
    assert [t.reward for t in out] == pytest.approx([0.8 / std, -0.2 / std, -0.3 / std, -0.3 / std], abs=1e-6)


def test_success_source_trains_on_the_success_indicator() -> None:
    won = Chunk(context_ids=[1], output_ids=[2])
    trajectories = [
        Trajectory(chunks=[won], reward=1.0, group_id="a", metadata={"success": True}),
        Trajectory(chunks=[won], reward=0.89, group_id="a", metadata={"success": False}),
        Trajectory(chunks=[won], reward=-0.1, group_id="a", metadata={"success": False}),
        Trajectory(chunks=[won], reward=1.0, group_id="a", metadata={"success": True}),
    ]
    out = train_rewards(trajectories, RewardConfig(source="success"))
    assert [t.reward for t in out] == [1.0, 0.0, 0.0, 1.0]
    assert [t.metadata["env_reward"] for t in out] == [1.0, 0.89, -0.1, 1.0]
    grouped = train_rewards(trajectories, RewardConfig(source="success", normalization="group"))
    assert [t.reward for t in grouped] == [0.5, -0.5, -0.5, 0.5]


def test_success_source_needs_a_recorded_success() -> None:
    chunk = Chunk(context_ids=[1], output_ids=[2])
    with pytest.raises(ValueError, match="records no success"):
        train_rewards([Trajectory(chunks=[chunk], reward=1.0, task_id="t#0")], RewardConfig(source="success"))
