"""A run's episodes as ATIF (runs/<name>/episodes/): every file the run writes validates with the atif
models and carries ALE's facts in `extra`: reward, start point k, chunk boundaries, weight versions, the
task-aware mask and error flag per chunk, token ids only when asked."""

from __future__ import annotations

from pathlib import Path

import atif
import pytest

from roll.config import ConfigError, validate_config
from roll.pipeline.config import TrainConfig
from roll.pipeline.episodes import episode_trajectory
from tests.view.run_fixture import episode, write_run


def test_every_episode_file_of_a_run_is_valid_atif(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "ipa", steps=2)
    files = sorted((run_dir / "episodes").rglob("*.json"))
    assert len(files) == 3 * 2 + 2 * 2  # 3 evaluations x 2 held-out tasks, 2 steps x 2 sampled episodes
    for path in files:
        trajectory = atif.Trajectory.model_validate_json(path.read_text())
        extra = trajectory.extra or {}
        assert extra["kind"] in ("eval", "train") and isinstance(extra["reward"], float)
        chunks = [s.extra["chunk"] for s in trajectory.steps if s.extra and "chunk" in s.extra]
        assert [c["index"] for c in chunks] == [0, 1, 2]
        assert "output_ids" not in chunks[0]  # token ids are opt-in


def test_chunk_facts_and_expert_prefill() -> None:
    played = episode("count-lines", start=2, won=False, version=4, expert_steps=2)
    trajectory = episode_trajectory(played, "ipa", "train", "step 5", token_ids=True)
    agent = [s for s in trajectory.steps if s.source == "agent"]
    assert [bool(s.is_copied_context) for s in agent] == [True, True, False, False, False]
    assert all(s.llm_call_count == 0 for s in agent[:2])
    first, failed = agent[2].extra["chunk"], agent[3].extra["chunk"]
    assert first["relevant"] is False and failed["error"] is True and failed["weight_version"] == 4
    assert first["output_ids"] == played.chunks[0].output_ids
    assert (
        agent[2].metrics is not None and agent[2].metrics.completion_token_ids == played.chunks[0].output_ids
    )
    extra = trajectory.extra
    assert extra["start"] == 2 and extra["success"] is False and extra["weight_versions"] == [4]
    assert extra["chunk_boundaries"] == [
        [len(c.context_ids), len(c.context_ids) + len(c.output_ids)] for c in played.chunks
    ]
    assert "transcript" not in extra["metadata"]


def test_the_episode_log_is_configured_under_episodes() -> None:
    config = validate_config(TrainConfig, {"episodes": {"train_per_step": 0, "token_ids": True}})
    assert config.episodes.train_per_step == 0 and config.episodes.token_ids
    with pytest.raises(ConfigError, match=r"episodes\.train_per_step"):
        validate_config(TrainConfig, {"episodes": {"train_per_step": -1}})


def test_gem_episodes_and_episodes_without_a_transcript() -> None:
    from roll.types import Chunk, Trajectory

    chunks = [
        Chunk(context_ids=[1, 2], output_ids=[3], weight_version=1),
        Chunk(context_ids=[1, 2, 3, 4], output_ids=[5]),
    ]
    transcript = [
        {"role": "user", "content": "Guess a number."},
        {"role": "assistant", "content": "\\boxed{5}"},
        {"role": "user", "content": "Higher."},
        {"role": "assistant", "content": "\\boxed{8}"},
    ]
    gem = Trajectory(chunks=chunks, reward=1.0, task_id="game:GuessTheNumber-v0#3",
                     metadata={"seed": 3, "index": 0, "success": True, "transcript": transcript})  # fmt: skip
    trajectory = episode_trajectory(gem, "gem", "eval", "after RL")
    assert trajectory.agent.name == "roll-gem" and trajectory.session_id == "gem/eval/after RL/seed-3#0"
    assert [s.extra["chunk"]["index"] for s in trajectory.steps if s.source == "agent"] == [0, 1]
    bare = gem.model_copy(update={"metadata": {"seed": 3}})
    steps = episode_trajectory(bare, "gem", "eval", "after RL").steps
    assert [s.extra["chunk"]["output_tokens"] for s in steps] == [1, 1] and "no transcript" in steps[
        0
    ].message
