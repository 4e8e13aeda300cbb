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


def failed_group_with_fallback() -> list[Trajectory]:
    """Group a: four failed episodes and the expert's step (reward 1) added as its imitation fallback;
    group b: mixed outcomes, no fallback."""
    chunk = Chunk(context_ids=[1], output_ids=[2])
    played = [Trajectory(chunks=[chunk], reward=0.0, group_id="a") for _ in range(4)]
    expert = Trajectory(chunks=[chunk], reward=1.0, group_id="a", metadata={"imitation": True})
    mixed = [Trajectory(chunks=[chunk], reward=r, group_id="b") for r in (1.0, 0.0)]
    return [*played, expert, *mixed]


def test_a_fallback_in_the_baseline_gives_the_failed_episodes_a_negative_advantage() -> None:
    out = train_rewards(failed_group_with_fallback(), RewardConfig(normalization="group_std", eps=1e-9))
    # group a: mean 0.2, population std 0.4 -> (0 - 0.2) / 0.4 = -0.5 and (1 - 0.2) / 0.4 = 2
    assert [t.reward for t in out] == pytest.approx([-0.5] * 4 + [2.0, 1.0, -1.0], abs=1e-6)


def test_without_the_fallback_in_the_baseline_an_all_failed_group_has_no_advantage() -> None:
    config = RewardConfig(normalization="group_std", eps=1e-9, imitation_in_baseline=False)
    out = train_rewards(failed_group_with_fallback(), config)
    assert [t.reward for t in out] == pytest.approx([0.0] * 5 + [1.0, -1.0], abs=1e-6)
    assert out[4].metadata["env_reward"] == 1.0


def test_without_normalisation_the_fallback_takes_its_groups_played_mean() -> None:
    # the loss's own group baseline then stays the played episodes' mean (0 in group a)
    out = train_rewards(failed_group_with_fallback(), RewardConfig(imitation_in_baseline=False))
    assert [t.reward for t in out] == [0.0] * 5 + [1.0, 0.0]
    batch_std = train_rewards(
        failed_group_with_fallback(), RewardConfig(normalization="batch_std", imitation_in_baseline=False)
    )
    # over the six played episodes: mean 1/6, and the fallback gets group a's mean of their z-scores
    assert batch_std[4].reward == pytest.approx(batch_std[0].reward)
