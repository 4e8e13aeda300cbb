"""A run's episodes as ATIF (runs/<name>/episodes/): every file the run writes validates with the atif
models and carries ALE's facts in `extra`: reward, start point k, chunk boundaries, weight versions, the
task-aware mask and error flag per chunk, token ids only when asked."""

from __future__ import annotations

import json
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


def test_mismatch_ratio_and_ipa_mask_per_chunk(tmp_path: Path) -> None:
    """Hand-computed: pi_old is mu shifted by +0.5 on chunk 0 and +1.0 on chunk 1 (ratios e^0.5 = 1.65,
    kept under H = 2, and e^1 = 2.72, dropped) and equal to it on chunk 2 (ratio 1)."""
    import math

    import torch

    from roll.algo.config import IPALossConfig
    from roll.pipeline.episodes import EpisodeLogConfig, chunk_mismatch, save_train_sample
    from roll.trainer.packing import pack_trajectories

    played = episode("count-lines", start=0, won=True, version=1)
    packed = pack_trajectories([played])
    shift = torch.tensor([0.5, 1.0, 0.0])[packed.chunk_index.clamp(min=0)]
    old = torch.where(packed.loss_mask, packed.engine_logprobs + shift, torch.zeros(()))
    ((first, second, third),) = chunk_mismatch([played], old, high=2.0, low=None)
    assert first[0] == pytest.approx(math.exp(0.5), rel=1e-5) and first[1] is True
    assert second[0] == pytest.approx(math.e, rel=1e-5) and second[1] is False
    assert third == (pytest.approx(1.0), True)

    config = EpisodeLogConfig(train_per_step=1)
    save_train_sample(tmp_path, 1, [played], config, IPALossConfig(mismatch_high=2.0), lambda _: old)
    (path,) = (tmp_path / "episodes" / "train").rglob("*.json")
    written = atif.Trajectory.model_validate_json(path.read_text())
    facts = [s.extra["chunk"] for s in written.steps if s.extra and "chunk" in s.extra]
    assert [f["ipa_mask"] for f in facts] == [True, False, True]
    assert facts[1]["mismatch_ratio"] == pytest.approx(math.e, rel=1e-5)


def test_training_episodes_are_scored_by_the_real_trainer(tmp_path: Path) -> None:
    from roll.algo.config import IPALossConfig
    from roll.pipeline.episodes import EpisodeLogConfig, save_train_sample
    from roll.trainer.packing import pack_trajectories
    from tests.roll.test_trainer import agentic_trajectories, backend

    trainer = backend()
    batch = agentic_trajectories(count=3)
    config = EpisodeLogConfig(train_per_step=2)
    kept = save_train_sample(
        tmp_path, 4, batch, config, IPALossConfig(), lambda s: trainer.logprobs(pack_trajectories(s))
    )
    assert kept == 2
    for path in (tmp_path / "episodes" / "train" / "step_000004").glob("*.json"):
        written = atif.Trajectory.model_validate_json(path.read_text())
        facts = [s.extra["chunk"] for s in written.steps if s.extra and "chunk" in s.extra]
        assert len(facts) == 4
        for fact in facts:
            assert fact["mismatch_ratio"] > 0 and fact["ipa_mask"] == (fact["mismatch_ratio"] <= 2.0)


def test_a_terminal_episode_keeps_the_chat_the_proxy_recorded() -> None:
    """The terminal env manager's own trajectory builder, fed a proxy record of two model calls after one
    expert step: the transcript is the last call's messages and its answer, the expert step is prefill."""
    import time

    from rock.proxy.types import Chunk, EpisodeRecord, RecordedChunk
    from roll.rollout.episode import EpisodeTask
    from roll.rollout.terminal.episode import AgentEpisode
    from roll.rollout.terminal.manager import TerminalEnvManager

    def call(call_id: str, command: str) -> dict:
        function = {"name": "run_shell_command", "arguments": json.dumps({"command": command})}
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        }

    history = [
        {"role": "system", "content": "You are iFlow."},
        {"role": "user", "content": "Count the lines of /app/a.txt."},
        call("expert-0", "ls /app"),
        {"role": "tool", "tool_call_id": "expert-0", "content": "a.txt\nExit code: 0"},
    ]
    first = call("c1", "wc -l /app/a.txt")
    result = {"role": "tool", "tool_call_id": "c1", "content": "3 /app/a.txt\nExit code: 0"}
    calls = [
        RecordedChunk(chunk=Chunk(context_ids=[1, 2, 3], output_ids=[4, 5], output_logprobs=[-0.1, -0.2]),
                      messages=history, answer=first, latency_s=0.1),
        RecordedChunk(chunk=Chunk(context_ids=[1, 2, 3, 4, 5, 6], output_ids=[7], output_logprobs=[-0.3]),
                      messages=[*history, first, result],
                      answer={"role": "assistant", "content": "3 lines."}, latency_s=0.1),
    ]  # fmt: skip
    episode = AgentEpisode("count-lines", EpisodeRecord(episode_id="e1", chunks=calls), reward=1.0)
    task = EpisodeTask("g0", seed=0, index=0, start=1)
    played = TerminalEnvManager._trajectory(None, task, "count-lines", 1, episode, True, time.perf_counter())  # type: ignore[arg-type]
    trajectory = episode_trajectory(played, "ipa", "train", "step 1")
    agent = [s for s in trajectory.steps if s.source == "agent"]
    assert [bool(s.is_copied_context) for s in agent] == [True, False, False]
    assert [s.extra["chunk"]["index"] for s in agent[1:]] == [0, 1]
    assert agent[1].observation is not None and "3 /app/a.txt" in str(agent[1].observation.results[0].content)
    assert agent[2].message == "3 lines." and trajectory.extra["start"] == 1
